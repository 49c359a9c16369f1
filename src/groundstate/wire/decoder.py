"""The sans-IO SIGIL decoder: bytes in, chunks out, one ground state per stream.

Every ambiguity resets the stream to its ground state (text mode, empty buffer) and emits one Reset
naming the reason; the tokens buffered since the last emitted chunk are dropped and counted, and the
rest of the damaged frame is never decoded. Any split of the input gives the same chunks.

The common case — DATA frames of the stream the last frame was for, in sequence, holding only tokens and
well-nested opcodes — is taken by a compiled loop (``_frameloop.c``) before this module sees the bytes: it stops
before any frame it does not accept whole, and this module handles that frame and decides everything that is not
the common case. ``Decoder(compiled=False)`` decodes with this module alone (the tests compare the two).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .. import safejson
from . import _frameloop
from .chunks import Chunk, Content, Hello, Reset, StreamEnd, UpstreamError
from .constants import (
    DEFAULT_MAX_PAYLOAD,
    LONG_TOKEN,
    MODE_ENDED_BY,
    MODE_STARTED_BY,
    MODES,
    RESERVED_OPCODES,
    SHORT_MAX,
    SHORT_MIN,
    VERSION,
    Kind,
    Mode,
    Op,
    Reason,
)
from .errors import HelloError
from .frames import Frame, FrameScanner, Junk
from .hello import decode_hello
from .varint import INCOMPLETE, OVERFLOW, decode_varint

# A run of hot and short tokens is split by the regex engine and mapped through a table, all in C.
_SIMPLE_RUN = re.compile(rb"(?:[\x00-\x7e]|[\x80-\xbf][\x00-\xff])+")
_SIMPLE_TOKEN = re.compile(rb"[\x00-\x7e]|[\x80-\xbf][\x00-\xff]")
DEFAULT_HOT_TABLE: tuple[int, ...] = tuple(range(127))
# plain ints and tuples for the per-byte and per-frame checks (an enum member costs a class attribute lookup each)
_CHUNK_END, _FLUSH, _STREAM_END = int(Op.CHUNK_END), int(Op.FLUSH), int(Op.STREAM_END)
_DATA, _HELLO, _UPSTREAM_ERROR = int(Kind.DATA), int(Kind.HELLO), int(Kind.UPSTREAM_ERROR)
_MODE_OF_BYTE: tuple[Mode, ...] = tuple(Mode)  # the entry-mode byte's Mode, by value
_LONG, _SHORT_MAX = int(LONG_TOKEN), int(SHORT_MAX)


@lru_cache(maxsize=16)
def _token_table(hot: tuple[int, ...]) -> dict[bytes, int]:
    """Every one- and two-byte token form to its id, for a hot table."""
    table = {
        bytes((lead, low)): ((lead & 0x3F) << 8) | low for lead in range(SHORT_MIN, SHORT_MAX + 1) for low in range(256)
    }
    table.update((bytes((i,)), token) for i, token in enumerate(hot))
    return table


@dataclass
class _Stream:
    """One stream's state. ``mode`` and ``buffer`` are the parse state that a reset returns to ground;
    ``expected`` (next seq), the hot table and the HELLO are the transport's and survive resets."""

    mode: Mode = Mode.TEXT
    buffer: list[int] = field(default_factory=list)
    expected: int | None = None  # None: the next frame must be a HELLO or carry seq 0
    awaiting_hello: bool = False
    hello: Hello | None = None
    hot: tuple[int, ...] = DEFAULT_HOT_TABLE
    open: bool = False  # has frames since its last STREAM_END


MAX_STREAMS = 1024  # streams whose state a decoder keeps at once


class Decoder:
    """``feed(data)`` returns the chunks the new bytes complete; ``close()`` ends the input."""

    def __init__(
        self, max_payload: int = DEFAULT_MAX_PAYLOAD, max_streams: int = MAX_STREAMS, compiled: bool = True
    ) -> None:
        self._frames = FrameScanner(max_payload)
        self._streams: dict[int, _Stream] = {}  # in order of first frame: the oldest ended stream is forgotten first
        self.max_streams = max_streams
        self.compiled = compiled
        self._current: int | None = None  # the stream of the last frame: the compiled loop's candidate

    def feed(self, data: bytes) -> list[Chunk]:
        """The chunks completed by these bytes (split anywhere); ambiguity resets the stream, never guesses."""
        out: list[Chunk] = []
        if not self.compiled:
            for item in self._frames.feed(data):
                self._handle(item, out)
            return out
        self._frames.add(data)
        while True:
            self._common_frames(out)
            items = self._frames.next()
            if not items:
                return out
            for item in items:
                self._handle(item, out)

    def _common_frames(self, out: list[Chunk]) -> None:
        """Let the compiled loop take the common frames at the start of the buffer (see the module's docstring)."""
        frames, sid = self._frames, self._current
        if sid is None or not frames.at_frame_start:
            return
        stream = self._streams.get(sid)
        if stream is None or stream.expected is None or stream.awaiting_hello:
            return
        end, expected, mode, taken = _frameloop.run(
            frames.buffer, 0, sid, stream.expected, stream.mode, stream.hot, frames.max_payload,
            stream.buffer, out, Content, _MODE_OF_BYTE,
        )  # fmt: skip
        if taken:
            frames.consume(end)
            stream.expected, stream.mode, stream.open = expected, _MODE_OF_BYTE[mode], True

    def close(self) -> list[Chunk]:
        """The end of the input: leftover bytes are handled, and every stream still open is reset (truncated)."""
        out: list[Chunk] = []
        for item in self._frames.close():
            self._handle(item, out)
        for stream_id in sorted(self._streams):
            stream = self._streams[stream_id]
            if stream.open:
                self._reset(out, stream_id, stream, Reason.TRUNCATED, "input ended before STREAM_END")
                stream.open = False
        return out

    def _forget_ended(self) -> bool:
        """Make room by forgetting the oldest stream that has ended (its state is only its next seq;
        a stream that resumes after being forgotten starts over with a HELLO or seq 0). False if all are open."""
        for stream_id, stream in self._streams.items():
            if not stream.open:
                del self._streams[stream_id]
                return True
        return False

    # -- frames ------------------------------------------------------------------------------------
    def _handle(self, item: Frame | Junk, out: list[Chunk]) -> None:
        if isinstance(item, Junk):
            out.append(Reset(None, Reason.FRAME_CORRUPT, skipped_bytes=item.skipped, detail=item.why))
            return
        sid = self._current = item.stream_id
        stream = self._streams.get(sid)
        if stream is None:
            if len(self._streams) >= self.max_streams and not self._forget_ended():
                out.append(Reset(sid, Reason.TOO_MANY_STREAMS, detail=f"more than {self.max_streams} open streams"))
                return  # no state is kept for it: the bound holds whatever a sender invents
            stream = self._streams[sid] = _Stream()
        gap = False
        if stream.awaiting_hello and item.kind != Kind.HELLO:
            return  # skipped until a HELLO for this stream arrives (the MissingHello reset was emitted)
        if stream.expected is None or stream.awaiting_hello:
            if item.kind != Kind.HELLO and item.seq != 0:
                stream.awaiting_hello = True
                self._reset(out, sid, stream, Reason.MISSING_HELLO, f"first frame has seq {item.seq}, not 0 or HELLO")
                return
        elif item.seq != stream.expected:
            self._reset(out, sid, stream, Reason.SEQUENCE_GAP, f"expected seq {stream.expected}, got {item.seq}")
            gap = True
        stream.expected = item.seq + 1
        stream.open = True
        if item.version != VERSION:
            self._reset(out, sid, stream, Reason.UNSUPPORTED_VERSION, f"version {item.version}")
        elif item.kind == Kind.DATA:
            self._data(item, stream, gap, out)
        elif item.kind == Kind.HELLO:
            self._hello(item, stream, out)
        elif item.kind == Kind.UPSTREAM_ERROR:
            self._upstream_error(item, stream, out)
        else:
            self._reset(out, sid, stream, Reason.UNKNOWN_FRAME_KIND, f"kind 0x{item.kind:02x}")

    def _hello(self, frame: Frame, stream: _Stream, out: list[Chunk]) -> None:
        try:
            vocabulary, table = decode_hello(frame.payload)
        except HelloError as exc:
            self._reset(out, frame.stream_id, stream, Reason.BAD_HELLO, str(exc))
            return
        hello = Hello(frame.stream_id, vocabulary, table)
        if stream.hello is not None and not stream.awaiting_hello:
            if stream.hello != hello:
                # a different table mid-stream: the frame is refused (the stream keeps the table it agreed on: a
                # HELLO is the transport's, like the next seq) and, like every reset, the parse state returns to the
                # ground — text mode, empty buffer, the buffered tokens dropped and counted —, so what follows decodes
                # as after any other reset, never in a mode or with tokens from before it
                self._reset(out, frame.stream_id, stream, Reason.BAD_HELLO, "a different HELLO mid-stream (refused)")
            return
        stream.hello, stream.awaiting_hello = hello, False
        stream.hot = DEFAULT_HOT_TABLE if table == DEFAULT_HOT_TABLE else table  # identity: the fast path
        out.append(hello)

    def _upstream_error(self, frame: Frame, stream: _Stream, out: list[Chunk]) -> None:
        try:
            record: Any = safejson.loads(frame.payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            record = None
        if not isinstance(record, dict):
            self._reset(out, frame.stream_id, stream, Reason.BAD_UPSTREAM_ERROR, "payload is not a JSON object")
            return
        out.append(UpstreamError(frame.stream_id, record))
        self._reset(out, frame.stream_id, stream, Reason.UPSTREAM_ERROR, str(record.get("plane", "")))

    def _data(self, frame: Frame, stream: _Stream, gap: bool, out: list[Chunk]) -> None:
        payload, sid = frame.payload, frame.stream_id
        if not payload:
            self._reset(out, sid, stream, Reason.FRAME_CORRUPT, "DATA frame without an entry-mode byte")
            return
        if payload[0] >= len(_MODE_OF_BYTE):
            self._reset(out, sid, stream, Reason.BAD_ENTRY_MODE, f"entry mode {payload[0]}")
            return
        entry = _MODE_OF_BYTE[payload[0]]
        if entry != stream.mode and not gap:
            self._reset(
                out,
                sid,
                stream,
                Reason.MODE_MISMATCH,
                f"frame enters {MODES[entry]}, stream is in {MODES[stream.mode]}",
            )
        stream.mode = entry
        self._tokens(payload, 1, sid, stream, out)

    # -- payload bytes -----------------------------------------------------------------------------
    def _tokens(self, data: bytes, i: int, sid: int, stream: _Stream, out: list[Chunk]) -> None:
        n = len(data)
        hot = stream.hot
        identity = hot is DEFAULT_HOT_TABLE
        match = _SIMPLE_RUN.match
        while i < n:
            byte = data[i]
            run = match(data, i) if byte <= _SHORT_MAX and byte != _LONG else None
            if run is not None:
                j = run.end()
                segment = data[i:j]
                if segment.isascii():  # hot tokens only
                    stream.buffer.extend(segment if identity else map(hot.__getitem__, segment))
                else:
                    stream.buffer.extend(map(_token_table(hot).__getitem__, _SIMPLE_TOKEN.findall(segment)))
                i = j
            elif byte <= _SHORT_MAX:  # a long token, or a short one the run could not take (its second byte missing)
                i = self._long_token(data, i, n, sid, stream, out)
                if i < 0:
                    return None
            elif byte == _CHUNK_END:  # the common opcode, inline
                i += 1
                if stream.buffer:
                    out.append(Content(sid, stream.mode, tuple(stream.buffer), True))
                    stream.buffer = []
            else:
                i += 1
                if not self._opcode(byte, sid, stream, out):
                    return
                if byte == _STREAM_END and i < n:
                    return self._reset(out, sid, stream, Reason.TRAILING_AFTER_END, f"{n - i} bytes after STREAM_END")
        return None

    def _long_token(self, data: bytes, i: int, n: int, sid: int, stream: _Stream, out: list[Chunk]) -> int:
        """The long token at ``i`` buffered: where the next byte is, or -1 after a reset (cut off, overflowing, or a
        short token whose second byte is missing)."""
        if data[i] != _LONG:
            self._reset(out, sid, stream, Reason.TRUNCATED_TOKEN, "short token cut off by the frame end")
            return -1
        value, j = decode_varint(data, i + 1, n)
        if value == INCOMPLETE:
            self._reset(out, sid, stream, Reason.TRUNCATED_TOKEN, "long token cut off by the frame end")
            return -1
        if value == OVERFLOW:
            self._reset(out, sid, stream, Reason.VARINT_OVERFLOW, f"long token at payload byte {i}")
            return -1
        stream.buffer.append(value)
        return int(j)

    def _opcode(self, byte: int, sid: int, stream: _Stream, out: list[Chunk]) -> bool:
        """Apply one control byte; False after a reset (the rest of the frame is dropped)."""
        if byte == Op.CHUNK_END:
            self._emit(out, sid, stream, True)
        elif byte == Op.FLUSH:
            self._emit(out, sid, stream, False)
        elif byte in MODE_STARTED_BY:
            if stream.mode != Mode.TEXT:
                self._reset(out, sid, stream, Reason.NESTED_MODE_START, f"0x{byte:02x} in {MODES[stream.mode]}")
                return False
            self._emit(out, sid, stream, True)
            stream.mode = MODE_STARTED_BY[byte]
        elif byte in MODE_ENDED_BY:
            if stream.mode != MODE_ENDED_BY[byte]:
                self._reset(out, sid, stream, Reason.UNMATCHED_MODE_END, f"0x{byte:02x} in {MODES[stream.mode]}")
                return False
            self._emit(out, sid, stream, True)
            stream.mode = Mode.TEXT
        elif byte == Op.STREAM_END:
            if stream.mode != Mode.TEXT:
                self._reset(out, sid, stream, Reason.UNTERMINATED_MODE, f"stream ended in {MODES[stream.mode]}")
            else:
                self._emit(out, sid, stream, True)
            out.append(StreamEnd(sid))
            stream.expected, stream.open = None, False
        elif byte in RESERVED_OPCODES:
            self._reset(out, sid, stream, Reason.RESERVED_OPCODE, f"0x{byte:02x}")
            return False
        else:
            self._reset(out, sid, stream, Reason.INVALID_BYTE, f"0x{byte:02x}")
            return False
        return True

    @staticmethod
    def _emit(out: list[Chunk], sid: int, stream: _Stream, boundary: bool) -> None:
        if stream.buffer:
            out.append(Content(sid, stream.mode, tuple(stream.buffer), boundary))
            stream.buffer = []

    @staticmethod
    def _reset(out: list[Chunk], sid: int, stream: _Stream, reason: str, detail: str = "") -> None:
        out.append(Reset(sid, reason, dropped=len(stream.buffer), detail=detail))
        stream.mode = Mode.TEXT  # the ground state, never a repaired one
        stream.buffer = []
