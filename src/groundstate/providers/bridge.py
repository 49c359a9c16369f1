"""Provider events to SIGIL frames: text → text mode, think → THINK, tool calls → TOOL_CALL (the call as
JSON), classified errors → UPSTREAM_ERROR frames, the end of the response → STREAM_END (truncated when the
stream was cut off).

Framing: ``push`` frames one event (a frame per token when the provider streams a token per chunk); ``push_many``
frames what arrived together — the events of one read of the upstream — in as few frames as it can, at most
``FRAME_TOKENS`` tokens each, and waits for nothing: a frame leaves as soon as the read that carried its tokens is
parsed. Per frame the decoder pays a fixed cost, so the read's framing is what lets a live stream decode at the rate
of a recording (docs/benchmarks.md, "SIGIL")."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable

from ..wire import Encoder, Mode, Vocabulary
from .normalized import ErrorEvent, Event, Finish, Refusal, TextDelta, ThinkDelta, ToolCall, Truncated

FRAME_TOKENS = 4096  # at most this many tokens in one frame of push_many: a subscriber gets a long read in pieces


class SigilBridge:
    """One response. ``push(event)`` returns the bytes of the frames it completed.

    A response with several completions (OpenAI ``n`` > 1) is framed as one SIGIL stream per completion: the
    first on ``stream_id``, each further one on a stream of its own, numbered by ``next_stream`` (by default the
    ids after ``stream_id``) and opened when its first event arrives — their texts were once merged into one. An
    upstream error or a cut-off ends them all."""

    def __init__(
        self,
        vocabulary: Vocabulary,
        stream_id: int = 1,
        *,
        frame_per_chunk: bool = True,
        next_stream: Callable[[], int] | None = None,
    ) -> None:
        self.vocabulary = vocabulary
        self.encoder = Encoder(stream_id, vocabulary=vocabulary.name, frame_per_chunk=frame_per_chunk)
        self._frame_per_chunk = frame_per_chunk
        self._next_stream = next_stream or itertools.count(stream_id + 1).__next__
        self._choices: dict[int, SigilBridge] = {}  # the further completions' streams, by choice index
        self._routes = True  # False on a further completion's stream: its events are all its own
        self._started = False
        self._ended = False  # a stream ends once: after its STREAM_END nothing more is framed

    def _choice(self, index: int) -> SigilBridge:
        """The stream of completion ``index`` (> 0), opened on first use."""
        if index not in self._choices:
            stream = SigilBridge(self.vocabulary, self._next_stream(), frame_per_chunk=self._frame_per_chunk)
            stream._routes = False
            self._choices[index] = stream
        return self._choices[index]

    def _hello(self) -> bytes:
        """The HELLO frame, once, before the stream's first frame."""
        if self._started:
            return b""
        self._started = True
        return self.encoder.hello()

    def push(self, event: Event) -> bytes:
        """SIGIL frames for one normalized event (the HELLO first, before the first event)."""
        if self._ended:
            return b""
        choice = getattr(event, "choice", 0) if self._routes else 0
        if choice:
            return self._choice(choice).push(event)
        if isinstance(event, ErrorEvent | Truncated):  # the whole response failed or was cut off: every stream
            return b"".join(other.push(event) for other in self._choices.values()) + self._own(event)
        return self._own(event)

    def _own(self, event: Event) -> bytes:
        """Frames for an event of the first completion (or of the whole response) on this bridge's stream."""
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
            self._ended = True
            return out + self.encoder.end(truncated=True)
        return out  # usage and tool-call fragments carry nothing for the wire

    def push_many(self, events: Iterable[Event]) -> bytes:
        """SIGIL frames for events that arrived together (one read of the upstream): text and thoughts gather into
        a frame (a new one every ``FRAME_TOKENS`` tokens) that ends with the last event, with one FLUSH, so the
        decoder emits them as one chunk per frame instead of one per event. Every other event frames as ``push``
        does. Nothing is held back for a later call: the bytes returned carry every event given."""
        out = bytearray()
        pending = 0  # tokens in the open frame, not yet flushed
        others: dict[int, list[Event]] = {}  # the further completions' events, framed together per stream
        for event in events:
            if self._ended:
                break
            choice = getattr(event, "choice", 0) if self._routes else 0
            if choice:
                others.setdefault(choice, []).append(event)
                continue
            if isinstance(event, ErrorEvent | Truncated) and others:  # what came before it on the other streams
                out += self._framed_others(others)
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
        return bytes(out + self._framed_others(others))

    def _framed_others(self, others: dict[int, list[Event]]) -> bytes:
        framed = b"".join(self._choice(index).push_many(batch) for index, batch in others.items())
        others.clear()
        return framed

    def end(self) -> bytes:
        """The frames that end the stream (nothing if it has ended: a Truncated event ends it cut off)."""
        if self._ended:
            return b""
        self._ended = True
        return b"".join(other.end() for other in self._choices.values()) + self.encoder.end()

    def tokens(self, mode: Mode, ids: list[int]) -> bytes:
        """Real token ids (the local model's), sent as they are generated."""
        if self._ended:
            return b""
        return self._hello() + self.encoder.content(mode, ids) + self.encoder.flush()

