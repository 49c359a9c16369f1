"""Typed encoder events from JSON lines (the input of ``groundstate wire encode``), and plain text.

One JSON object per line:
``{"event": "text" | "think" | "tool_call" | "code_block", "text": "..."}`` (or ``"tokens": [ids]``),
``{"event": "chunk_end"}``, ``{"event": "flush"}``, ``{"event": "end"}``,
``{"event": "upstream_error", "error": {...}}``; an optional ``"stream": n`` picks the stream (default 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .. import safejson
from .constants import Mode
from .encoder import Encoder
from .errors import EncodeError
from .vocab import Vocabulary

_MODES = {"text": Mode.TEXT, "think": Mode.THINK, "tool_call": Mode.TOOL_CALL, "code_block": Mode.CODE_BLOCK}
_SIMPLE = {"chunk_end", "flush", "end", "cut"}


class EventError(EncodeError):
    """A JSON line that is not a valid event; the message names the line."""


def parse_events(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = safejson.loads(line)
        except ValueError as exc:
            raise EventError(f"line {number}: not JSON ({getattr(exc, 'msg', exc)})") from None
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            raise EventError(f'line {number}: expected an object with an "event" field')
        kind = event["event"]
        if kind not in _MODES and kind not in _SIMPLE and kind != "upstream_error":
            raise EventError(f"line {number}: unknown event {kind!r}")
        stream = event.get("stream", 1)
        if not isinstance(stream, int) or not 0 <= stream < 2**32:
            raise EventError(f"line {number}: stream must be an integer in 0 .. 2**32 - 1")
        if kind in _MODES and not (isinstance(event.get("text"), str) or _is_ids(event.get("tokens"))):
            raise EventError(f'line {number}: a {kind} event needs "text" (a string) or "tokens" (ids)')
        if kind == "upstream_error" and not isinstance(event.get("error"), dict):
            raise EventError(f'line {number}: an upstream_error event needs an "error" object')
        yield number, event


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(t, int) and 0 <= t < 2**32 for t in value)


class MultiEncoder:
    """One Encoder per stream, created with a HELLO on first use."""

    def __init__(self, vocabulary: Vocabulary, hot_table: list[int] | None = None, max_payload: int | None = None):
        self.vocabulary = vocabulary
        self.hot_table = hot_table
        self.max_payload = max_payload
        self.encoders: dict[int, Encoder] = {}

    def apply(self, event: dict[str, Any]) -> bytes:
        stream = event.get("stream", 1)
        out = b""
        encoder = self.encoders.get(stream)
        if encoder is None:
            options: dict[str, Any] = {"vocabulary": self.vocabulary.name, "hot_table": self.hot_table}
            if self.max_payload:
                options["max_payload"] = self.max_payload
            encoder = self.encoders[stream] = Encoder(stream, **options)
            out = encoder.hello()
        kind = event["event"]
        if kind in _MODES:
            ids = event["tokens"] if "tokens" in event else self.vocabulary.encode(event["text"])
            return out + encoder.content(_MODES[kind], ids)
        if kind == "upstream_error":
            return out + encoder.upstream_error(event["error"])
        if kind == "end":
            del self.encoders[stream]
        simple: bytes = getattr(encoder, kind)()
        return out + simple

    def finish(self) -> bytes:
        """End every stream still open."""
        return b"".join(self.apply({"event": "end", "stream": s}) for s in sorted(self.encoders))


def text_events(text: str) -> Iterator[dict[str, Any]]:
    """Plain text: one text event and a chunk boundary per line."""
    for line in text.splitlines(keepends=True):
        yield {"event": "text", "text": line}
        yield {"event": "chunk_end"}
