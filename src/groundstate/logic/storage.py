"""Stored relations: a set of fact tuples plus the hash indexes the compiled rules ask for.

An index maps a key to a bucket of facts; a bucket is a dict used as an insertion-ordered set, so facts are met in
the order they were stored (deterministic, like a list) and one is removed in constant time (retracting one edge
of a chain takes a fact out of a thousand buckets of a thousand facts each)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from . import _relations

Fact = tuple[Any, ...]
add_facts = _relations.add  # (relation, new facts): Relation.add, for callers that skip the method call
remove_facts = _relations.remove  # (relation, a set of stored facts): Relation.remove, likewise
undo_changes = _relations.undo  # (relations, predicate -> (inserted, deleted)): each relation as before the changes


class Relation:
    """Facts of one predicate; an index is built on first use and maintained from then on."""

    __slots__ = ("arity", "facts", "indexes", "name")

    def __init__(self, name: str, arity: int) -> None:
        self.name = name
        self.arity = arity
        self.facts: set[Fact] = set()
        self.indexes: dict[tuple[int, ...], tuple[Callable[[Fact], Any], dict[Any, dict[Fact, None]]]] = {}

    def __len__(self) -> int:
        return len(self.facts)

    def index(self, columns: tuple[int, ...]) -> dict[Any, dict[Fact, None]]:
        entry = self.indexes.get(columns)
        if entry is None:
            key = itemgetter(*columns)
            table: dict[Any, dict[Fact, None]] = {}
            file_facts(table, key, self.facts)
            entry = (key, table)
            self.indexes[columns] = entry
        return entry[1]

    def add(self, new: set[Fact]) -> None:
        """Add facts known not to be stored yet (into the fact set and every index: ``_relations.c``)."""
        _relations.add(self, new)

    def remove(self, old: Iterable[Fact]) -> None:
        """Remove facts known to be stored; empty index buckets are dropped (negation tests key presence)."""
        _relations.remove(self, old if isinstance(old, set | frozenset) else set(old))

    def clear(self) -> None:
        self.facts = set()
        for columns in list(self.indexes):
            self.indexes[columns] = (self.indexes[columns][0], {})


def file_facts(table: dict[Any, dict[Fact, None]], key: Callable[[Fact], Any], facts: Iterable[Fact]) -> None:
    """Put each fact in the bucket of its key, in one index (``_relations.c``)."""
    _relations.file(table, key, facts)
