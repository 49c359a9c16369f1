"""What every SSE-based provider adapter shares: bytes in, events out, truncation reported at close."""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from .. import safejson
from .errors import AMBIGUOUS, ErrorRecord, classify
from .in_band import event_end
from .normalized import (
    ErrorEvent,
    Event,
    Finish,
    Refusal,
    TextDelta,
    ThinkDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Truncated,
    parse_arguments,
)
from .sse import ServerSentEvent, SSEParser

_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXT = (TextDelta, ThinkDelta, Refusal)


def whole(text: str) -> str:
    """``text`` as valid Unicode: each UTF-16 surrogate pair (two code points after ``json.loads`` of ``"\\ud83d
    \\ude00"`` when the halves arrived in two pieces) made the one character it encodes, and a surrogate without its
    other half made U+FFFD, as an invalid UTF-8 byte is: no text an adapter emits fails to encode downstream."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


MAX_EVENT = 4 << 20  # bytes of one stream event (an NDJSON line for Ollama): no model's stream sends one longer


@dataclass
class OpenCall:
    """A tool call whose argument fragments are still arriving."""

    number: int  # order of appearance: the index of its events
    id: str | None
    name: str | None
    choice: int = 0
    fragments: list[str] = field(default_factory=list)


MAX_NAME_CHARS = 512  # of a tool call's name or id written from JSON that is not text


class StreamAdapter(ABC):
    """Subclasses implement ``_event`` (one SSE event), keying open tool calls as their provider does."""

    end_marker = "its end marker"
    line_framed = False  # True: an event ends with its line (NDJSON); False: with a blank line (SSE)
    incomplete_call = "the stream ended before the tool call was complete"
    text_only: re.Pattern[bytes] | None = None
    """An event (its bytes between two blank lines) that matches this whole can yield nothing but text and changes
    nothing the adapter keeps: ``without_text_events`` drops it for a reader that counts only usage and errors."""
    _text_runs: Runs | None = None

    @classmethod
    def text_runs(cls) -> Runs | None:
        """Runs of ``text_only``'s events (``_runs_of``), compiled on first use and kept in the class's own
        namespace: a ``re`` pattern's hash reads its whole program (10 µs), so a cache keyed by the pattern cost a
        third of the match it served."""
        runs: Runs | None = cls.__dict__.get("_text_runs")
        if runs is None and cls.text_only is not None:
            runs = _runs_of(cls.text_only)
            cls._text_runs = runs
        return runs

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self._sse = SSEParser()
        self._calls: dict[Hashable, OpenCall] = {}
        self._call_count = 0
        self._split: dict[tuple[type[TextDelta | ThinkDelta | Refusal], int], str] = {}  # a high surrogate per kind
        self.done = False
        self._unended = 0  # bytes since the last end of an event
        self.overlong = False  # an event ran past MAX_EVENT: the stream was refused, nothing more is read

    def _refused(self, data: bytes) -> list[Event] | None:
        """The error that ends a stream once an event runs past ``MAX_EVENT`` bytes without its end (None while
        none does): the parser holds an event until it ends, and an upstream that never ended one held the reader's
        memory at its will (an attack grew the gateway by a megabyte per relayed megabyte). Past it nothing more is
        read; the caller gets one error, not a truncated event."""
        end = event_end("ollama" if self.line_framed else "sse", data)
        self._unended = len(data) - end if end else self._unended + len(data)
        if self._unended <= MAX_EVENT:
            return None
        self.overlong = True
        record = classify(self.provider, None, {"error": {"message": "a stream event longer than the bound"}})
        record.message = (f"the stream sent an event longer than {MAX_EVENT} bytes, which no model's stream sends; "
                          "it was not read further")  # fmt: skip
        return [ErrorEvent(record)]

    def feed(self, data: bytes) -> list[Event]:
        """The normalized events this chunk of the provider's bytes completes."""
        if self.overlong:
            return []
        if (refused := self._refused(data)) is not None:
            return refused
        out: list[Event] = []
        for event in self._sse.feed(data):
            if not self.done:
                self._contained(event, out)
        return self._whole(out)

    def _whole(self, events: list[Event], final: bool = False) -> list[Event]:
        """``events`` with whole characters in their text. A character outside the BMP is escaped in JSON as two
        surrogates (``\\ud83d\\ude00``), and a provider streaming token by token may send the halves in two events:
        a delta's trailing high surrogate is held back and joined to the next delta of its kind and choice, so the text
        arrives whole. One never completed (the choice finished, the stream ended) is U+FFFD, like any lone one."""
        if not self._split and not any(isinstance(e, _TEXT) and _SURROGATE.search(e.text) for e in events):
            return events  # the common case: nothing to join or replace
        out: list[Event] = []
        for event in events:
            if isinstance(event, _TEXT):
                key = (type(event), event.choice)
                text = self._split.pop(key, "") + event.text
                if "\ud800" <= text[-1:] <= "\udbff":
                    self._split[key], text = text[-1], text[:-1]
                if text:
                    event.text = whole(text)
                    out.append(event)
                continue
            if isinstance(event, Finish | Truncated):  # no more text of that choice (or of any) to pair with
                self._flush_split(out, None if isinstance(event, Truncated) else event.choice)
            out.append(event)
        if final:
            self._flush_split(out, None)
        return out

    def _flush_split(self, out: list[Event], choice: int | None) -> None:
        """Held high surrogates (of one choice, or all) that will get no other half: U+FFFD each."""
        for key in [k for k in self._split if choice is None or k[1] == choice]:
            del self._split[key]
            kind, number = key
            out.append(kind(whole("\ud800"), number))

    def without_text_events(self, data: bytes, batch: int = 64) -> Iterator[bytes]:
        """``data`` (a stream's bytes from any point on) without the events that ``text_only`` matches, in parts of
        at most ``batch`` events kept: feeding the parts gives the same usage and errors as feeding ``data``, at a
        fraction of the cost (the gateway's metrics read each relayed reply only for those). An event is dropped
        only where the SSE parser is known to be between events: after a blank line (LF LF) within ``data``, never
        the first, and only when a blank line ends it too. A run of such events is skipped by one match
        (``_runs_of``): a step of Python per event cost as much as the match itself."""
        runs = self.text_runs()
        kept_from = kept = 0  # kept_from: where the span being kept began; kept: the events ended in it
        position = data.find(b"\n\n")
        while position >= 0:
            position += 2  # just past a blank line: between events
            kept += 1
            run = runs.match(data, position) if runs is not None else None  # (an empty run matches: always found)
            skipped = run.end() if run is not None else position
            if skipped > position:
                if kept_from < position:
                    yield data[kept_from:position]
                kept_from, kept, position = skipped, 0, skipped
            elif kept >= batch:
                yield data[kept_from:position]
                kept_from, kept = position, 0
            position = data.find(b"\n\n", position)
        if kept_from < len(data):
            yield data[kept_from:]

    def _contained(self, event: ServerSentEvent, out: list[Event]) -> None:
        """One event, whatever its shape: a field of an unexpected type (a list where an object belongs, a number
        for a string) is reported as an unreadable event with its data, never raised into the caller."""
        mark = len(out)
        try:
            self._event(event, out)
        except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
            del out[mark:]
            record = unreadable(self.provider, event.data)
            record.message = f"a stream event of an unexpected shape ({type(exc).__name__}: {str(exc)[:200]})"
            out.append(ErrorEvent(record))

    def close(self) -> list[Event]:
        """The end of the stream: what was held back, and Truncated if the provider's end marker never came."""
        if self.overlong:
            return []  # refused already, with its error
        out: list[Event] = []
        truncated: list[Event] = []
        for event in self._sse.close():
            if isinstance(event, ServerSentEvent):
                if not self.done:
                    self._contained(event, out)
            else:
                truncated.append(Truncated(f"the stream ended inside an event: {event.pending_line or event.data!r}"))
        if not self.done:
            self._finish_calls(out, complete=False)  # incomplete calls are reported, never executed
            out += truncated or [Truncated(f"the stream ended without {self.end_marker}")]
        return self._whole(out, final=True)

    # -- tool calls ----------------------------------------------------------------------------------------
    def _start_call(
        self, key: Hashable, call_id: object, name: object, out: list[Event], choice: int = 0
    ) -> OpenCall:
        """A call opened under ``key``; one still open under the same key ends first and is reported (a provider that
        reused an index for a second call lost the first from the record)."""
        if key in self._calls:
            self._finish_call(key, out, complete=True)
        call = self._calls[key] = OpenCall(self._call_count, text_or_none(call_id), text_or_none(name), choice)
        self._call_count += 1
        out.append(ToolCallStart(call.number, call.id, call.name, call.choice))
        return call

    def _add_arguments(self, call: OpenCall, fragment: str, out: list[Event]) -> None:
        call.fragments.append(fragment)
        out.append(ToolCallDelta(call.number, fragment))

    def _finish_call(self, key: Hashable, out: list[Event], complete: bool) -> None:
        """A complete call's arguments are parsed; an incomplete one gets no arguments and says why."""
        call = self._calls.pop(key)
        raw = whole("".join(call.fragments))  # a surrogate pair split across two fragments is one character again
        arguments, error = parse_arguments(raw) if complete else (None, self.incomplete_call)
        out.append(ToolCall(call.number, call.id, call.name, arguments, error, raw, call.choice))

    def _finish_calls(self, out: list[Event], complete: bool, choice: int | None = None) -> None:
        """Every open call (or only those of one choice) ends, in order of appearance."""
        for key in sorted(self._calls, key=lambda k: self._calls[k].number):
            if choice is None or self._calls[key].choice == choice:
                self._finish_call(key, out, complete)

    def _payload(self, event: ServerSentEvent, out: list[Event]) -> dict[str, Any] | None:
        """The event's JSON object, or None after reporting an unreadable event."""
        try:
            payload = safejson.loads(event.data)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            out.append(ErrorEvent(unreadable(self.provider, event.data)))
            return None
        return payload

    @abstractmethod
    def _event(self, event: ServerSentEvent, out: list[Event]) -> None:
        """Turn one SSE event into normalised events."""


class Runs(Protocol):
    """A compiled run of events: where the run that starts at ``pos`` ends (``match(data, pos).end()``)."""

    def match(self, text: bytes, pos: int) -> Any: ...


def _runs_of(event: re.Pattern[bytes]) -> Runs:
    """Events ``event`` matches, each ended by a blank line (LF LF), as many in a row as there are. ``event``
    cannot match a line break, so each match ends exactly where its event does.

    Matched by RE2, whose DFA reads the run once: 3× faster than ``re``'s backtracking on a run of text chunks
    (13 against 41 µs for 100 chunks), the largest single cost of the gateway's CPU per stream. In Latin-1, so
    that a byte is a character as it is for ``re`` on bytes (UTF-8 would not match a chunk that is no UTF-8 where
    ``re`` does). RE2 knows no possessive quantifier, and ``event``'s are there only to keep ``re`` from
    backtracking: no part of it can match what a possessive part gave back (white space before a comma, a
    string's characters before its quote), so the language is the same — property-tested against ``re``. Imported
    here, on the first skim: a command that never relays a reply does not load RE2."""
    import re2

    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.never_capture = True
    greedy = event.pattern.replace(b"*+", b"*").replace(b")?+", b")?")
    return cast(Runs, re2.compile(b"(?:(?:" + greedy + b")\n\n)*", options))


def unreadable(provider: str, data: str) -> ErrorRecord:
    """An event that is not a JSON object decides nothing about its cause: ambiguous, with the raw data."""
    record = classify(provider, None, {"error": {"message": "a stream event that is not a JSON object"}})
    assert record.plane == AMBIGUOUS
    record.evidence["body"] = data[:2000]
    return record


def as_items(value: Any) -> list[Any]:
    """A field that should be a list (a delta's ``tool_calls``, a chunk's ``choices``), as one: the list it is, one
    object sent without its list, or any other value as one item — a native call the adapters could not read was not
    reported at all, so the run did not pause on it (found by an attack; it never ran: tools run only from the
    control packet). Nothing (None, an empty list, object or text) is no item."""
    if value is None or value == [] or value == {} or value == "":
        return []
    return value if isinstance(value, list) else [value]


def text_or_none(value: object) -> str | None:
    """A tool call's name or id as text: a provider's (or a model's) number, list or object for it is written as
    JSON — the call is still reported, as the native call it is, never an error of the agent that made it (found
    by an attack: a name of 12345 failed the attempt on ``name[:n]``)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)[:MAX_NAME_CHARS]
