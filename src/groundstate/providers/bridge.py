"""Provider events to SIGIL frames: text → text mode, think → THINK, tool calls → TOOL_CALL (the call as
JSON), classified errors → UPSTREAM_ERROR frames, the end of the response → STREAM_END (truncated when the
stream was cut off).

Framing: ``push`` frames one event (a frame per token when the provider streams a token per chunk); ``push_many``
frames what arrived together — the events of one read of the upstream — in as few frames as it can, at most
``FRAME_TOKENS`` tokens each. Per frame the decoder pays a fixed cost, so the framing is what lets a live stream decode
at the rate of a recording (docs/benchmarks.md, "SIGIL").

Holding: with ``hold`` > 0 (seconds) the text and thoughts of a frame are held across pushes until the frame is that
old or holds ``FRAME_TOKENS`` tokens — a fast stream whose every event arrives alone (one token per read) is framed
as a recording would be, at a cost in latency of at most ``hold`` per token. Anything else that arrives (a tool
call, an error, the end) releases what is held first, in order. Nothing is held by a clock: the owner asks
``held_for`` after a push and calls ``release`` when that time has passed (the gateway schedules it on its loop),
so a stream that pauses still publishes what it had. With ``hold`` 0 (the default) nothing is held: a frame leaves
as soon as the read that carried its tokens is parsed."""

from __future__ import annotations

import heapq
import itertools
import json
import math
import time
from collections.abc import Callable, Iterable

from ..errors import InputError
from ..wire import Encoder, Mode, Vocabulary
from .normalized import ErrorEvent, Event, Finish, Refusal, TextDelta, ThinkDelta, ToolCall, Truncated


class HoldRefused(InputError, ValueError):
    """A hold that is no number of seconds, 0 or more (or more than its owner allows)."""


def checked_hold(hold: object, most: float = math.inf, what: str = "a SIGIL frame's hold") -> float:
    """``hold`` if it is seconds from 0 to ``most`` (not NaN, not a bool); HoldRefused naming ``what`` otherwise."""
    if isinstance(hold, bool) or not isinstance(hold, int | float) or not 0 <= hold <= most:  # NaN too
        bound = "seconds, 0 or more:" if most == math.inf else f"0 to {most:g} seconds,"
        raise HoldRefused(f"{what} is {bound} not {hold!r}")
    return float(hold)


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
        hold: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``hold``: seconds a frame's text and thoughts may wait for more (see the module); ``clock`` reads the time
        those seconds are counted in."""
        self.hold = checked_hold(hold)
        self.vocabulary = vocabulary
        self.encoder = Encoder(stream_id, vocabulary=vocabulary.name, frame_per_chunk=frame_per_chunk)
        self._frame_per_chunk = frame_per_chunk
        self._clock = clock
        self._held = 0  # tokens in the open frame, not yet flushed
        self._held_since = 0.0  # when its first token came (the clock's reading)
        self._noted: float | None = None  # the _held_since its response's first bridge has in _holding
        # (held since, choice) of the further completions' held frames, soonest first; entries of frames flushed
        # since are skipped when met — held_for and release stay linear in the streams that hold, not in them all
        self._holding: list[tuple[float, int]] = []
        self._next_stream = next_stream or itertools.count(stream_id + 1).__next__
        self._choices: dict[int, SigilBridge] = {}  # the further completions' streams, by choice index
        self._routes = True  # False on a further completion's stream: its events are all its own
        self._started = False
        self._ended = False  # a stream ends once: after its STREAM_END nothing more is framed

    def _choice(self, index: int) -> SigilBridge:
        """The stream of completion ``index`` (> 0), opened on first use."""
        if index not in self._choices:
            stream = SigilBridge(self.vocabulary, self._next_stream(), frame_per_chunk=self._frame_per_chunk,
                                 hold=self.hold, clock=self._clock)  # fmt: skip
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
            return self._watched(choice, self._choice(choice).push(event))
        if isinstance(event, ErrorEvent | Truncated):  # the whole response failed or was cut off: every stream
            return b"".join(other.push(event) for other in self._choices.values()) + self._own(event)
        return self._own(event)

    def _own(self, event: Event) -> bytes:
        """Frames for an event of the first completion (or of the whole response) on this bridge's stream."""
        out = self._hello()
        if isinstance(event, TextDelta | Refusal | ThinkDelta):
            mode = Mode.THINK if isinstance(event, ThinkDelta) else Mode.TEXT
            return out + self._tokens(mode, self.vocabulary.encode(event.text)) + self._due()
        if isinstance(event, ToolCall | ErrorEvent | Finish | Truncated):
            out += self._flushed()  # what is held goes first, as it came
        encode = self.vocabulary.encode
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
        does. Without ``hold`` nothing is held back for a later call: the bytes returned carry every event given;
        with it, the open frame's text and thoughts wait until due (``held_for``, ``release``)."""
        out = bytearray()
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
                out += self._tokens(mode, self.vocabulary.encode(event.text))
                continue
            out += self.push(event)  # what is held is emitted first (an error resets the stream)
        out += self._due()
        return bytes(out + self._framed_others(others))

    def _tokens(self, mode: Mode, ids: list[int]) -> bytes:
        """``ids`` into the open frame, a full frame flushed every ``FRAME_TOKENS`` tokens (the rest goes on in the
        next one, without a copy of the rest)."""
        out = bytearray()  # not bytes: adding to bytes copies it whole, a 32 MiB event took 90 s
        start = 0
        while self._held + len(ids) - start >= FRAME_TOKENS:
            end = start + FRAME_TOKENS - self._held
            out += self.encoder.content(mode, ids[start:end])
            out += self.encoder.flush()
            self._held, start = 0, end
        if start < len(ids):
            if not self._held:
                self._held_since = self._clock()
            out += self.encoder.content(mode, ids[start:])
            self._held += len(ids) - start
        return bytes(out)

    def _flushed(self) -> bytes:
        """The open frame flushed now, if it holds tokens."""
        if not self._held:
            return b""
        self._held, self._noted = 0, None
        return self.encoder.flush()

    def _due(self) -> bytes:
        """The open frame flushed if it may not wait: no hold, or held for ``hold`` already."""
        if self._held and (not self.hold or not self._wait(self._held_since)):
            return self._flushed()
        return b""

    def _wait(self, since: float) -> float:
        """Seconds left of the hold of a frame held since ``since``: 0 once due — and when the clock reads earlier
        than ``since`` (a clock set back) or no number, so that nothing waits longer than ``hold``."""
        elapsed = self._clock() - since
        return self.hold - elapsed if 0 <= elapsed < self.hold else 0.0

    def held_for(self) -> float | None:
        """Seconds until what is held (on any of the response's streams) is due — ``release`` it then; None when
        nothing is held."""
        holding = self._holding
        while holding and not self._still_held(*holding[0]):
            heapq.heappop(holding)
        since = [self._held_since] if self._held else []
        if holding:
            since.append(holding[0][0])
        return self._wait(min(since)) if since else None

    def release(self) -> bytes:
        """The frames of everything held, on every stream of the response, now."""
        out = self._flushed()
        while self._holding:
            _, index = heapq.heappop(self._holding)
            out += self._choices[index]._flushed()  # a stale entry's is nothing
        return out

    def _still_held(self, since: float, index: int) -> bool:
        other = self._choices[index]
        return bool(other._held) and other._held_since == since

    def _watched(self, index: int, framed: bytes) -> bytes:
        """``framed`` (what completion ``index``'s stream just framed), noting when that stream began to hold."""
        other = self._choices[index]
        if other._held and other._noted != other._held_since:
            other._noted = other._held_since
            heapq.heappush(self._holding, (other._held_since, index))
        return framed

    def _framed_others(self, others: dict[int, list[Event]]) -> bytes:
        framed = b"".join(self._watched(index, self._choice(index).push_many(batch))
                          for index, batch in others.items())  # fmt: skip
        others.clear()
        return framed

    def end(self) -> bytes:
        """The frames that end the stream (nothing if it has ended: a Truncated event ends it cut off)."""
        if self._ended:
            return b""
        self._ended = True
        return b"".join(other.end() for other in self._choices.values()) + self._flushed() + self.encoder.end()

    def tokens(self, mode: Mode, ids: list[int]) -> bytes:
        """Real token ids (the local model's), sent as they are generated."""
        if self._ended:
            return b""
        return self._hello() + self._tokens(mode, list(ids)) + self._due()


class MutedBridge(SigilBridge):
    """The bridge of a reply nobody subscribes to: it frames nothing. The gateway without ``--publish`` gives each
    relayed reply this one instead of a real bridge, whose set-up (an encoder, a vocabulary) was 2 % of the gateway's
    CPU per stream, and whose frames went nowhere."""

    def __init__(self) -> None:  # nothing to set up: no frame is ever encoded
        pass

    def push(self, event: Event) -> bytes:
        return b""

    def push_many(self, events: Iterable[Event]) -> bytes:
        return b""

    def held_for(self) -> float | None:
        return None

    def release(self) -> bytes:
        return b""

    def end(self) -> bytes:
        return b""


MUTED = MutedBridge()
