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

from ..wire import Encoder, Mode, Vocabulary
from .normalized import ErrorEvent, Event, Finish, Refusal, TextDelta, ThinkDelta, ToolCall, Truncated

FRAME_TOKENS = 4096  # at most this many tokens in one frame of push_many: a subscriber gets a long read in pieces


class SigilBridge:
    """One response stream. ``push(event)`` returns the bytes of the frames it completed."""

    def __init__(self, vocabulary: Vocabulary, stream_id: int = 1, *, frame_per_chunk: bool = True) -> None:
        self.vocabulary = vocabulary
        self.encoder = Encoder(stream_id, vocabulary=vocabulary.name, frame_per_chunk=frame_per_chunk)
        self._started = False

    def _hello(self) -> bytes:
        """The HELLO frame, once, before the stream's first frame."""
        if self._started:
            return b""
        self._started = True
        return self.encoder.hello()

    def push(self, event: Event) -> bytes:
        """SIGIL frames for one normalized event (the HELLO first, before the first event)."""
        out = self._hello()
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
            return out + self.encoder.upstream_error(event.error.to_json())
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
                out += self._hello()
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
        return self._hello() + self.encoder.content(mode, ids) + self.encoder.flush()

