"""Annotated frame-level hex of a SIGIL byte stream (``groundstate wire dump``)."""

from __future__ import annotations

from collections.abc import Iterator

from .constants import LONG_TOKEN, MODES, SHORT_MAX, Kind, Mode, Op
from .frames import Frame, FrameScanner, Junk
from .varint import decode_varint

_KINDS: dict[int, str] = {Kind.HELLO: "HELLO", Kind.DATA: "DATA", Kind.UPSTREAM_ERROR: "UPSTREAM_ERROR"}
_OPS = {op.value: op.name for op in Op}


def dump(data: bytes) -> Iterator[str]:
    scanner = FrameScanner()
    for item in scanner.feed(data) + scanner.close():
        if isinstance(item, Junk):
            yield f"{item.offset:08x}  JUNK {item.skipped} bytes ({item.why})"
            continue
        yield from _frame(item, data)


def _frame(frame: Frame, data: bytes) -> Iterator[str]:
    kind = _KINDS.get(frame.kind, f"kind 0x{frame.kind:02x}")
    yield (
        f"{frame.offset:08x}  {kind} stream={frame.stream_id} seq={frame.seq} payload={len(frame.payload)} bytes"
        f" v{frame.version} crc ok"
    )
    yield f"          header  {data[frame.offset : frame.offset + frame.size - len(frame.payload) - 4].hex(' ')}"
    if frame.kind == Kind.DATA and frame.payload:
        entry = frame.payload[0]
        yield f"          entry   {entry:02x}  ({MODES[Mode(entry)] if entry <= Mode.CODE_BLOCK else 'invalid'})"
        yield from _tokens(frame.payload, 1)
    elif frame.payload:
        yield f"          payload {frame.payload.hex(' ')}"


def _tokens(payload: bytes, i: int) -> Iterator[str]:
    n = len(payload)
    while i < n:
        byte = payload[i]
        if byte < LONG_TOKEN:
            j = i
            while j < n and payload[j] < LONG_TOKEN:
                j += 1
            yield f"          {payload[i:j].hex(' ')}  hot x{j - i}"
            i = j
        elif byte == LONG_TOKEN:
            value, j = decode_varint(payload, i + 1, n)
            j = j if value >= 0 else n
            yield f"          {payload[i:j].hex(' ')}  long token {value if value >= 0 else '(bad varint)'}"
            i = j
        elif byte <= SHORT_MAX:
            token = ((byte & 0x3F) << 8) | payload[i + 1] if i + 1 < n else None
            yield f"          {payload[i : i + 2].hex(' ')}  short token {token if token is not None else '(cut off)'}"
            i += 2
        else:
            yield f"          {byte:02x}  {_OPS.get(byte, 'reserved' if 0xC8 <= byte <= 0xCE else 'invalid byte')}"
            i += 1
