"""The HELLO payload: ``varint length + UTF-8 vocabulary id`` then the 127 hot-table token ids as varints."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .constants import HOT_SIZE
from .errors import HelloError
from .varint import INCOMPLETE, OVERFLOW, decode_varint, encode_varint


def encode_hello(vocabulary: str, hot_table: Sequence[int]) -> bytes:
    return _hello(vocabulary, tuple(hot_table))


@functools.lru_cache(maxsize=64)
def _hello(vocabulary: str, hot_table: tuple[int, ...]) -> bytes:
    """The payload, built once per vocabulary and table: a run opens a stream (and says HELLO) per model round, with
    the same 127 ids each time (~30 µs of varints)."""
    check_hot_table(hot_table)
    name = vocabulary.encode("utf-8")
    return encode_varint(len(name)) + name + b"".join(encode_varint(t) for t in hot_table)


def check_hot_table(hot_table: Sequence[int]) -> None:
    if len(hot_table) != HOT_SIZE:
        raise HelloError(f"a hot table has exactly {HOT_SIZE} token ids, not {len(hot_table)}")
    if len(set(hot_table)) != HOT_SIZE:
        raise HelloError("a hot table may not list a token id twice")


def decode_hello(payload: bytes) -> tuple[str, tuple[int, ...]]:
    n = len(payload)
    length, i = decode_varint(payload, 0, n)
    if length < 0 or i + length > n:
        raise HelloError("vocabulary name length is malformed or runs past the payload")
    try:
        vocabulary = payload[i : i + length].decode("utf-8")
    except UnicodeDecodeError:
        raise HelloError("vocabulary name is not UTF-8") from None
    i += length
    table = []
    for k in range(HOT_SIZE):
        value, i = decode_varint(payload, i, n)
        if value == INCOMPLETE:
            raise HelloError(f"hot table ends after {k} of {HOT_SIZE} ids")
        if value == OVERFLOW:
            raise HelloError(f"hot table id {k} is not a valid varint")
        table.append(value)
    if i != n:
        raise HelloError(f"{n - i} bytes after the hot table")
    check_hot_table(table)
    return vocabulary, tuple(table)
