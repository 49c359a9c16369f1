"""Splitting an input into the pieces a network might deliver, for incremental = batch tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T", bytes, str)


def split_at(data: T, cuts: Sequence[int]) -> list[T]:
    """``data`` cut at each position of ``cuts`` (taken modulo its length + 1, in order); empty pieces included."""
    pieces = []
    previous = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        pieces.append(data[previous:cut])
        previous = cut
    pieces.append(data[previous:])
    return pieces
