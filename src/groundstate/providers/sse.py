"""A sans-IO Server-Sent Events parser following the WHATWG rules exactly.

Bytes in, events out. UTF-8 is decoded incrementally (a character split across network chunks never
becomes U+FFFD); CRLF, LF and bare CR all end lines, even when a CRLF is split across chunks; only
these three end a line (U+2028 inside JSON is data). A stream that ends inside an event reports the
truncation instead of dropping or accepting the partial event. One deliberate addition to the WHATWG
rules: an event whose only lines are non-standard fields is still reported (see ``_dispatch``).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field


@dataclass(slots=True)
class ServerSentEvent:
    """One dispatched server-sent event: its type, data, id and retry."""

    data: str
    event: str = "message"
    id: str = ""  # the last event id, which persists across events
    retry: int | None = None  # the reconnection time in force, if a valid retry: field set one
    fields: dict[str, str] = field(default_factory=dict)  # non-standard fields (some servers send error:)


@dataclass(slots=True)
class SSETruncated:
    """The stream ended inside an event: these lines were never completed by a blank line."""

    data: str
    event: str
    pending_line: str


_BOM = "\ufeff"


class SSEParser:
    """A sans-IO server-sent-events parser: bytes in, events out, lines split anywhere."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial: list[str] = []  # pieces of the line not yet ended (joined once, when it ends)
        self._skip_lf = False  # the previous piece ended with CR: a leading LF completes that CRLF
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._fields: dict[str, str] = {}
        self._has_event_lines = False
        self.last_event_id = ""
        self.retry: int | None = None

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        """The events completed by this chunk of bytes."""
        return self._text(self._utf8.decode(data))

    def close(self) -> list[ServerSentEvent | SSETruncated]:
        """End of stream: a partial event is reported as SSETruncated (never dispatched)."""
        out: list[ServerSentEvent | SSETruncated] = []
        out.extend(self._text(self._utf8.decode(b"", final=True)))
        pending = "".join(self._partial)
        if pending or self._has_event_lines:
            out.append(SSETruncated("\n".join(self._data), self._event, pending))
        self._partial, self._data, self._event, self._fields, self._has_event_lines = [], [], "", {}, False
        return out

    def _leading(self, text: str) -> str:
        """The chunk without what belongs to what came before: the stream's BOM, the LF of a CRLF split in two."""
        if not self._started and text:
            self._started = True
            if text.startswith(_BOM):
                text = text[1:]
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        return text

    def _next_line_start(self, text: str, end: int) -> int:
        """Where the next line starts after the line ending at ``end`` (CR, LF or CRLF)."""
        if text[end] != "\r":
            return end + 1
        if end + 1 < len(text):
            return end + 2 if text[end + 1] == "\n" else end + 1
        self._skip_lf = True  # a CR ends this piece: the LF may come in the next one
        return end + 1

    def _text(self, text: str) -> list[ServerSentEvent]:
        text = self._leading(text)
        out: list[ServerSentEvent] = []
        start, n = 0, len(text)
        next_cr, next_lf = text.find("\r"), text.find("\n")  # each searched again only once passed: linear
        while next_cr >= 0 or next_lf >= 0:
            end = next_lf if next_cr < 0 or (0 <= next_lf < next_cr) else next_cr
            piece = text[start:end]
            if self._partial:  # a line begun in earlier chunks: joined once, now that it has ended
                self._partial.append(piece)
                piece = "".join(self._partial)
                self._partial = []
            self._line_done(piece, out)
            start = self._next_line_start(text, end)
            if next_cr < start:
                next_cr = text.find("\r", start)
            if next_lf < start:
                next_lf = text.find("\n", start)
        if start < n:
            self._partial.append(text[start:])
        return out

    def _line_done(self, line: str, out: list[ServerSentEvent]) -> None:
        if not line:
            self._dispatch(out)
            return
        if line[0] == ":":
            return  # a comment (keep-alives)
        self._has_event_lines = True
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry":
            if value and value.isascii() and value.isdigit():
                self.retry = int(value)
        else:
            self._fields[name] = value

    def _dispatch(self, out: list[ServerSentEvent]) -> None:
        # WHATWG drops an event without data; one carrying a non-standard field (llama.cpp's "error:") is
        # reported all the same, or the error it carries would vanish.
        if self._data or self._fields:
            out.append(
                ServerSentEvent(
                    "\n".join(self._data), self._event or "message", self.last_event_id, self.retry, self._fields
                )
            )
        self._data, self._event, self._fields, self._has_event_lines = [], "", {}, False
