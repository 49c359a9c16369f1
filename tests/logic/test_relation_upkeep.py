"""A stored relation's upkeep (``logic/_relations.c``): after any sequence of additions and removals, the fact set
and every index are exactly what filing the facts from scratch gives — buckets in the order the facts came, no
empty bucket left (a negation tests a key's presence) — and misuse is an error, never a crash."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.logic.storage import Relation, add_facts, file_facts, remove_facts, undo_changes

facts = st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from(["a", "b"]))
operations = st.lists(st.tuples(st.booleans(), st.sets(facts, max_size=4)), max_size=12)
COLUMNS = [(0,), (1, 2), (2, 0, 1)]


def expected_indexes(held: set[tuple[Any, ...]]) -> dict[tuple[int, ...], dict[Any, set[tuple[Any, ...]]]]:
    """Each index as filing the facts held from scratch builds it (bucket order: the next test)."""
    out: dict[tuple[int, ...], dict[Any, set[tuple[Any, ...]]]] = {}
    for columns in COLUMNS:
        table: dict[Any, set[tuple[Any, ...]]] = {}
        for fact in held:
            key = fact[columns[0]] if len(columns) == 1 else tuple(fact[c] for c in columns)
            table.setdefault(key, set()).add(fact)
        out[columns] = table
    return out


@settings(max_examples=300, deadline=None)
@given(st.sets(facts, max_size=5), operations, st.integers(0, 12))
def test_additions_and_removals_leave_what_filing_from_scratch_gives(
    first: set[tuple[Any, ...]], steps: list[tuple[bool, set[tuple[Any, ...]]]], indexed_after: int
) -> None:
    relation = Relation("r", 3)
    relation.add(set(first))
    held = set(first)
    for step, (adding, chosen) in enumerate(steps):
        if step == indexed_after:
            for columns in COLUMNS:  # indexes built part-way, from the facts then held, maintained from then on
                relation.index(columns)
        if adding:
            new = chosen - held
            add_facts(relation, new)
            held |= new
        else:
            old = chosen & held
            remove_facts(relation, old)
            held -= old
    assert relation.facts == held
    for columns, (_, table) in relation.indexes.items():
        assert all(table.values()), "an emptied bucket was left behind"
        assert {key: set(bucket) for key, bucket in table.items()} == expected_indexes(held)[columns]


@settings(max_examples=200, deadline=None)
@given(st.sets(facts, max_size=6), st.sets(facts, max_size=4), st.sets(facts, max_size=4))
def test_changes_undone_leave_each_relation_as_it_was(
    first: set[tuple[Any, ...]], more: set[tuple[Any, ...]], fewer: set[tuple[Any, ...]]
) -> None:
    """What a supposition does on leaving: every relation it changed gets back what went and loses what came."""
    relations = {name: Relation(name, 3) for name in ("r", "s")}
    for relation in relations.values():
        relation.add(set(first))
        for columns in COLUMNS:
            relation.index(columns)
    before = {name: (set(r.facts), {c: {k: set(b) for k, b in t.items()} for c, (_, t) in r.indexes.items()})
              for name, r in relations.items()}  # fmt: skip
    inserted, deleted = more - first, fewer & first
    for relation in relations.values():
        relation.remove(deleted)
        relation.add(inserted)
    undo_changes(relations, {name: (inserted, deleted) for name in relations})
    after = {name: (set(r.facts), {c: {k: set(b) for k, b in t.items()} for c, (_, t) in r.indexes.items()})
             for name, r in relations.items()}  # fmt: skip
    assert after == before


def test_buckets_keep_the_order_the_facts_came_in() -> None:
    relation = Relation("r", 2)
    relation.index((0,))
    for fact in [(1, "c"), (1, "a"), (1, "b")]:
        relation.add({fact})
    relation.remove({(1, "a")})
    relation.add({(1, "a")})
    assert list(relation.index((0,))[1]) == [(1, "c"), (1, "b"), (1, "a")]


def test_misuse_is_an_error_and_changes_nothing_it_should_not() -> None:
    relation = Relation("r", 2)
    relation.index((0,))
    relation.add({(1, "a")})
    with pytest.raises(KeyError):
        relation.remove({(2, "b")})  # not stored: its key has no bucket
    with pytest.raises(TypeError, match="set of facts"):
        add_facts(relation, [(3, "c")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="set of facts"):
        remove_facts(relation, [(1, "a")])  # type: ignore[arg-type]
    assert relation.facts == {(1, "a")} and relation.index((0,)) == {1: {(1, "a"): None}}

    def broken(fact: tuple[Any, ...]) -> Any:
        raise RuntimeError(f"no key for {fact}")

    table: dict[Any, dict[tuple[Any, ...], None]] = {}
    with pytest.raises(RuntimeError, match="no key"):
        file_facts(table, broken, [(1, "a")])
    with pytest.raises(TypeError, match="unhashable"):
        file_facts(table, lambda fact: [fact], [(1, "a")])
    assert table == {}
    with pytest.raises(TypeError, match="pair"):
        undo_changes({"r": relation}, {"r": ({(1, "a")},)})  # type: ignore[dict-item]
    with pytest.raises(KeyError):
        undo_changes({}, {"missing": (set(), set())})
    assert relation.facts == {(1, "a")}
