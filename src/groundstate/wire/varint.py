"""Unsigned LEB128 varints of at most 5 bytes holding values below 2**32."""

from __future__ import annotations

from .constants import MAX_VARINT_BYTES, VARINT_LIMIT
from .errors import EncodeError

INCOMPLETE = -1  # the varint runs past the end of the data given
OVERFLOW = -2  # a 6th byte, or a value of 2**32 or more


def encode_varint(value: int) -> bytes:
    if not 0 <= value < VARINT_LIMIT:
        raise EncodeError(f"varint value {value} is outside 0 .. 2**32 - 1")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """(value, next position), or (INCOMPLETE or OVERFLOW, position of the varint)."""
    value = 0
    shift = 0
    i = pos
    while True:
        if i - pos == MAX_VARINT_BYTES:
            return OVERFLOW, pos
        if i >= end:
            return INCOMPLETE, pos
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            if value >= VARINT_LIMIT:
                return OVERFLOW, pos
            return value, i
        shift += 7
