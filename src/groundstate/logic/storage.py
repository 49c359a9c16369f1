"""Stored relations: a set of fact tuples plus the hash indexes the compiled rules ask for."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

Fact = tuple[Any, ...]


class Relation:
    """Facts of one predicate; an index is built on first use and maintained from then on."""

    __slots__ = ("arity", "facts", "indexes", "name")

    def __init__(self, name: str, arity: int) -> None:
        self.name = name
        self.arity = arity
        self.facts: set[Fact] = set()
        self.indexes: dict[tuple[int, ...], tuple[Callable[[Fact], Any], dict[Any, list[Fact]]]] = {}

    def __len__(self) -> int:
        return len(self.facts)

    def index(self, columns: tuple[int, ...]) -> dict[Any, list[Fact]]:
        entry = self.indexes.get(columns)
        if entry is None:
            key = itemgetter(*columns)
            table: dict[Any, list[Fact]] = {}
            _file(table, key, self.facts)
            entry = (key, table)
            self.indexes[columns] = entry
        return entry[1]

    def add(self, new: set[Fact]) -> None:
        """Add facts known not to be stored yet."""
        self.facts |= new
        for key, table in self.indexes.values():
            _file(table, key, new)

    def remove(self, old: Iterable[Fact]) -> None:
        """Remove facts known to be stored; empty index buckets are dropped (negation tests key presence).

        Each affected bucket is rebuilt once, so removing many facts that share a key stays linear."""
        old = old if isinstance(old, set) else set(old)
        if not old:
            return
        self.facts -= old
        for key, table in self.indexes.values():
            for k in {key(fact) for fact in old}:
                kept = [fact for fact in table[k] if fact not in old]
                if kept:
                    table[k] = kept
                else:
                    del table[k]

    def clear(self) -> None:
        self.facts = set()
        for columns in list(self.indexes):
            self.indexes[columns] = (self.indexes[columns][0], {})


def _file(table: dict[Any, list[Fact]], key: Callable[[Fact], Any], facts: Iterable[Fact]) -> None:
    """Append each fact to the bucket of its key."""
    for fact in facts:
        k = key(fact)
        bucket = table.get(k)
        if bucket is None:
            table[k] = [fact]
        else:
            bucket.append(fact)
