"""Types of the compiled relation upkeep (``_relations.c``)."""

from collections.abc import Callable, Iterable
from typing import Any

Fact = tuple[Any, ...]

def add(relation: Any, new: set[Fact] | frozenset[Fact]) -> None:
    """New facts (not stored yet) into the relation's fact set and every index."""

def remove(relation: Any, old: set[Fact] | frozenset[Fact]) -> None:
    """Stored facts out of the relation's fact set and every index; an emptied bucket goes."""

def file(table: dict[Any, dict[Fact, None]], key: Callable[[Fact], Any], facts: Iterable[Fact]) -> None:
    """Each fact into the bucket of ``key(fact)`` in one index table."""

def undo(relations: dict[str, Any], changes: dict[str, tuple[set[Fact], set[Fact]]]) -> None:
    """Each relation named in ``changes`` as it was before them: what came removed, what went added back."""
