"""Provider events to SIGIL frames: text → text mode, think → THINK, tool calls → TOOL_CALL (the call as
JSON), classified errors → UPSTREAM_ERROR frames, the end of the response → STREAM_END (truncated when the
stream was cut off).

Framing: ``push`` frames one event (a frame per token when the provider streams a token per chunk); ``push_many``
frames what arrived together — the events of one read of the upstream — in as few frames as it can, at most
``FRAME_TOKENS`` tokens each, and waits for nothing: a frame leaves as soon as the read that carried its tokens is
parsed. Per frame the decoder pays a fixed cost, so the read's framing is what lets a live stream decode at the rate
of a recording (docs/benchmarks.md, "SIGIL")."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..wire import Encoder, Mode, Vocabulary
from .normalized import ErrorEvent, Event, Finish, Refusal, TextDelta, ThinkDelta, ToolCall, Truncated

FRAME_TOKENS = 4096  # at most this many tokens in one frame of push_many: a subscriber gets a long read in pieces
MAX_ERROR_TEXT = 2000  # characters of each text of an error record published (an upstream writes the message)
MAX_ERROR_RECORD = 16 * 1024  # bytes of a published error record: one frame, far under the frame's payload limit


class SigilBridge:
    """One response stream. ``push(event)`` returns the bytes of the frames it completed."""

    def __init__(self, vocabulary: Vocabulary, stream_id: int = 1, *, frame_per_chunk: bool = True) -> None:
        self.vocabulary = vocabulary
        self.encoder = Encoder(stream_id, vocabulary=vocabulary.name, frame_per_chunk=frame_per_chunk)
        self._started = False

    def push(self, event: Event) -> bytes:
        """SIGIL frames for one normalized event (the HELLO first, before the first event)."""
        out = b"" if self._started else self.encoder.hello()
        self._started = True
        encode = self.vocabulary.encode
        if isinstance(event, TextDelta | Refusal):
            return out + self.encoder.content(Mode.TEXT, encode(event.text)) + self.encoder.flush()
        if isinstance(event, ThinkDelta):
            return out + self.encoder.content(Mode.THINK, encode(event.text)) + self.encoder.flush()
        if isinstance(event, ToolCall):
            call = {"id": event.id, "name": event.name, "arguments": event.arguments}
            if event.arguments_error:
                call |= {"arguments_error": event.arguments_error, "raw_arguments": event.raw_arguments}
            return (
                out
                + self.encoder.content(Mode.TOOL_CALL, encode(json.dumps(call)))
                + self.encoder.close_mode()
                + self.encoder.chunk_end()
            )
        if isinstance(event, ErrorEvent):
            return out + self.encoder.upstream_error(_publishable(event.error.to_json()))
        if isinstance(event, Finish):
            return out + self.encoder.close_mode() + self.encoder.chunk_end()
        if isinstance(event, Truncated):
            return out + self.encoder.end(truncated=True)
        return out  # usage and tool-call fragments carry nothing for the wire

    def push_many(self, events: Iterable[Event]) -> bytes:
        """SIGIL frames for events that arrived together (one read of the upstream): text and thoughts gather into
        a frame (a new one every ``FRAME_TOKENS`` tokens) that ends with the last event, with one FLUSH, so the
        decoder emits them as one chunk per frame instead of one per event. Every other event frames as ``push``
        does. Nothing is held back for a later call: the bytes returned carry every event given."""
        out = bytearray()
        pending = 0  # tokens in the open frame, not yet flushed
        for event in events:
            if isinstance(event, TextDelta | Refusal | ThinkDelta):
                if not self._started:
                    out += self.encoder.hello()
                    self._started = True
                mode = Mode.THINK if isinstance(event, ThinkDelta) else Mode.TEXT
                ids = self.vocabulary.encode(event.text)
                start = 0  # a full frame is flushed, the rest goes on in the next one (no copy of the rest)
                while pending + len(ids) - start >= FRAME_TOKENS:
                    end = start + FRAME_TOKENS - pending
                    out += self.encoder.content(mode, ids[start:end]) + self.encoder.flush()
                    pending, start = 0, end
                if start < len(ids):
                    out += self.encoder.content(mode, ids[start:])
                    pending += len(ids) - start
                continue
            if pending:  # what came before it is emitted first, as push would have (an error resets the stream)
                out += self.encoder.flush()
                pending = 0
            out += self.push(event)
        if pending:
            out += self.encoder.flush()
        return bytes(out)

    def end(self) -> bytes:
        """The frames that end the stream."""
        return self.encoder.end()

    def tokens(self, mode: Mode, ids: list[int]) -> bytes:
        """Real token ids (the local model's), sent as they are generated."""
        out = b"" if self._started else self.encoder.hello()
        self._started = True
        return out + self.encoder.content(mode, ids) + self.encoder.flush()


def _publishable(record: dict[str, Any]) -> dict[str, Any]:
    """An error record that fits one UPSTREAM_ERROR frame: an upstream writes its message and evidence, and a
    70 KB message made a frame past the payload limit (the relay failed, the subscribers lost the read). Each text
    is cut to ``MAX_ERROR_TEXT`` characters, saying how much was cut; a record still too large keeps only its
    classification."""
    try:
        if len(json.dumps(record)) <= MAX_ERROR_RECORD:
            return record
        cut: dict[str, Any] = _cut(record, depth=0)
        if len(json.dumps(cut)) <= MAX_ERROR_RECORD:
            return cut
    except (RecursionError, TypeError, ValueError):  # nested past what JSON encodes: its classification only
        pass
    kept = {key: record.get(key) for key in ("plane", "provider", "status", "retryable", "retry_after_s")}
    return kept | {"message": "the upstream's error record was too large to publish"}


def _cut(value: Any, depth: int) -> Any:
    if isinstance(value, str) and len(value) > MAX_ERROR_TEXT:
        return value[:MAX_ERROR_TEXT] + f"… ({len(value) - MAX_ERROR_TEXT} characters cut)"
    if depth > 8:
        return "…" if isinstance(value, dict | list) else value
    if isinstance(value, dict):
        return {str(key)[:MAX_ERROR_TEXT]: _cut(item, depth + 1) for key, item in list(value.items())[:50]}
    if isinstance(value, list):
        return [_cut(item, depth + 1) for item in value[:50]]
    return value
