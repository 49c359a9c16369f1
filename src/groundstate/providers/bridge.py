"""Provider events to SIGIL frames: text → text mode, think → THINK, tool calls → TOOL_CALL (the call as
JSON), classified errors → UPSTREAM_ERROR frames, the end of the response → STREAM_END (truncated when the
stream was cut off)."""

from __future__ import annotations

import json

from ..wire import Encoder, Mode, Vocabulary
from .normalized import ErrorEvent, Event, Finish, Refusal, TextDelta, ThinkDelta, ToolCall, Truncated


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
            return out + self.encoder.upstream_error(event.error.to_json())
        if isinstance(event, Finish):
            return out + self.encoder.close_mode() + self.encoder.chunk_end()
        if isinstance(event, Truncated):
            return out + self.encoder.end(truncated=True)
        return out  # usage and tool-call fragments carry nothing for the wire

    def end(self) -> bytes:
        """The frames that end the stream."""
        return self.encoder.end()

    def tokens(self, mode: Mode, ids: list[int]) -> bytes:
        """Real token ids (the local model's), sent as they are generated."""
        out = b"" if self._started else self.encoder.hello()
        self._started = True
        return out + self.encoder.content(mode, ids) + self.encoder.flush()
