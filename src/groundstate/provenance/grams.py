"""Which kept results may hold a value, without reading them all: a filter of each result's 4-byte pieces.

A value occurs in a text only if every run of ``GRAM`` bytes of the value (UTF-8) occurs in the text's. Each kept
result gets a bit per bucket of a hash of its grams; a value's grams name their buckets, and only the
results with all of them set can hold it. Those few are then searched (``str.find``); the others cannot
hold it, so nothing is missed — the filter only decides where to look. Before it, a decision scanned every kept
result (a mebibyte: ~0.17 ms, and the scan pushed the decision's own data out of the processor's caches, which cost
as much again); a session that recorded a result between two decisions also re-joined all of them first.

Bounded: each result has ``buckets_for(bound)`` bits, as many as let a full session's fit ``MAX_FILTER_BYTES``
(2 KiB a result at the default bound of 200); a result with more distinct grams than that sets most of its bits and
is simply always searched (as before: linear, never wrong). The bits grow with the results kept, not ahead of them.
"""

from __future__ import annotations

import numpy as np

GRAM = 4  # bytes in a piece (a value reaches the filter with at least MIN_VALUE characters: 5 bytes or more)
MAX_FILTER_BYTES = 512 * 1024  # one full session's filter, at most (up to a bound of 65,536 results)
MOST_BUCKETS = 1 << 14  # a result's bits at the default bound (200 results): 2 KiB a result
FEWEST_BUCKETS = 1 << 6  # (a bound past 65,536 results outgrows the budget by 8 bytes a result)
LOOKED_UP = 32  # a value's grams looked up, at most (spread over it): a subset can only let more results through
_MULTIPLIER = np.uint32(0x9E3779B1)  # Fibonacci hashing: the top bits of x·φ·2³² spread consecutive inputs


def buckets_for(capacity: int) -> int:
    """The bits of each result for a session keeping ``capacity``: a power of two, as many as the budget gives."""
    fitting = MAX_FILTER_BYTES * 8 // max(capacity, 1)
    bits = FEWEST_BUCKETS
    while bits * 2 <= min(fitting, MOST_BUCKETS):
        bits *= 2
    return bits


def _buckets(data: bytes, bits: int, most: int | None = None) -> np.ndarray:
    """The bucket of each gram of ``data`` (every starting offset; or ``most`` of them, spread over it): its 4 bytes
    read as one little-endian word in place (a view, no copy of a mebibyte four times over), hashed."""
    count = len(data) - GRAM + 1
    words = np.ndarray((count,), dtype="<u4", buffer=data, strides=(1,))
    if most is not None and count > most:
        words = words[:: -(-count // most)]  # spread over the value, at most ``most`` of them
    shift = np.uint32(32 - bits.bit_length() + 1)
    return (words * _MULTIPLIER) >> shift


class GramFilter:
    """One bit per (bucket, slot) of one session's kept results: the rows are buckets, the columns a ring of
    ``capacity`` slots (a result's slot is its number modulo the capacity; the kept numbers are consecutive and never
    more than the capacity). A value's buckets pick a few rows; their AND is the slots that may hold it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.bits = buckets_for(capacity)
        self._width = (capacity + 7) // 8  # bytes of slots in a row once the ring is full
        self._columns = np.zeros((self.bits, 0), dtype=np.uint8)  # grown as results arrive: an idle session is small

    def add(self, number: int, text: str) -> None:
        """The bits of the result ``number`` (its slot cleared of whatever result held it before)."""
        slot = number % self.capacity
        column, bit = slot >> 3, np.uint8(1 << (slot & 7))
        if column >= self._columns.shape[1]:
            grown = np.zeros((self.bits, min(max(column + 1, 2 * self._columns.shape[1]), self._width)), np.uint8)
            grown[:, : self._columns.shape[1]] = self._columns
            self._columns = grown
        self._columns[:, column] &= ~bit
        data = text.encode("utf-8", "surrogatepass")
        if len(data) >= GRAM:  # (no gram: it holds no value of GRAM bytes or more; shorter ones see every slot)
            self._columns[_buckets(data, self.bits), column] |= bit  # (a bucket named twice: the same bit set)

    def may_hold(self, value: str, numbers: range) -> list[int]:
        """Those of ``numbers`` (kept results, consecutive) whose bits have every looked-up gram of ``value`` — all of
        them when they are more than the ring holds (a Session built with a filter smaller than its History's bound,
        found by an attack: the older ones' slots were taken by newer ones)."""
        data = value.encode("utf-8", "surrogatepass")
        if len(data) < GRAM or not numbers or len(numbers) > self.capacity:
            return list(numbers)
        found = _buckets(data, self.bits, LOOKED_UP)  # (a mebibyte's value: 32 pieces hashed, not a million)
        every = np.bitwise_and.reduce(self._columns[found], axis=0)  # (a slot past the columns holds no result)
        slots = np.flatnonzero(np.unpackbits(every, bitorder="little"))
        base = numbers.start - numbers.start % self.capacity  # the number whose slot is 0, in the ring's turn
        held = (base + slot if base + slot >= numbers.start else base + self.capacity + slot for slot in slots.tolist())
        return sorted(number for number in held if number in numbers)
