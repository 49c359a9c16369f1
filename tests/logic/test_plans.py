"""Planner, code generation and storage: join order, index choice, and index maintenance."""

from __future__ import annotations

import pytest

from groundstate.logic import Engine, Program
from groundstate.logic.codegen import FACTS, INDEX, SEED, compile_rule
from groundstate.logic.planner import SEED_HEAD, SEED_NEGATIVE, SEED_POSITIVE, Seed, order_body
from groundstate.logic.storage import Relation


def analyzed(text: str):  # type: ignore[no-untyped-def]
    return Program.parse(text).analyze()


def test_both_recursive_formulations_read_edge_through_an_index() -> None:
    program = analyzed(
        "edge(1, 2).\n"
        "left(X, Z) :- left(X, Y), edge(Y, Z).\nleft(X, Y) :- edge(X, Y).\n"
        "right(X, Z) :- edge(X, Y), right(Y, Z).\nright(X, Y) :- edge(X, Y).\n"
    )
    left, _, right, _ = program.rules
    plan = compile_rule(left, Seed(SEED_POSITIVE, 0), program.predicates)
    assert [s.kind for s in plan.sources] == [SEED, INDEX]
    assert plan.sources[1].predicate == "edge" and plan.sources[1].columns == (0,)
    plan = compile_rule(right, Seed(SEED_POSITIVE, 1), program.predicates)
    assert [s.kind for s in plan.sources] == [SEED, INDEX]
    assert plan.sources[1].columns == (1,)


def test_filters_run_as_soon_as_their_inputs_are_bound() -> None:
    program = analyzed("a(1). b(1, 2). c(2).\np(X, Y) :- a(X), b(X, Y), c(Y), !c(X), X < Y.")
    order, bound = order_body(program.rules[0], None, program.predicates)
    assert order == [0, 3, 1, 2, 4]  # a, !c(X), b, then the checks in body order: c(Y), X < Y
    assert bound == {"X", "Y"}


def test_a_membership_test_runs_before_a_value_is_computed() -> None:
    """A stored atom whose arguments are all bound, a negation and a comparison reject rows before the rule words a
    reason for them: the MCP guard's rules build one per candidate row, and most rows fail a membership test."""
    program = analyzed(
        'call("c", "s", "t"). destructive("s", "t"). unattended("x").\n'
        'held(C, R) :- call(C, S, T), R = fn:string:concat(S, "/", T), destructive(S, T), !unattended(C).'
    )
    order, _ = order_body(program.rules[0], Seed(SEED_POSITIVE, 0), program.predicates)
    assert order == [2, 3, 1]  # destructive(S, T), !unattended(C), then the reason
    plan = compile_rule(program.rules[0], Seed(SEED_POSITIVE, 0), program.predicates)
    facts = {"destructive": {("s", "t")}, "unattended": {("x",)}}
    args = [[("c", "s", "t"), ("d", "s", "u"), ("x", "s", "t")] if s.kind == SEED else facts[s.predicate]
            for s in plan.sources]  # fmt: skip
    assert plan.function(*args) == {("c", "s/t")}


def test_most_bound_atom_goes_first_after_a_seed() -> None:
    program = analyzed("q(1, 2, 3). r(1). s(3).\np(X) :- s(Z), q(X, Y, Z), r(X).")
    order, _ = order_body(program.rules[0], Seed(SEED_POSITIVE, 2), program.predicates)
    assert order == [1, 0]  # q shares X with the seed r(X); s shares nothing until q has run


def test_ground_atom_is_a_membership_test_and_negation_uses_an_index_for_wildcards() -> None:
    program = analyzed("e(1, 2). f(1).\np(X) :- f(X), e(X, 2), !e(X, _).")
    plan = compile_rule(program.rules[0], None, program.predicates)
    # the constant makes e(X, 2) the best start (an index lookup on column 1); then the two checks, in body order:
    # f(X), a membership test, and the negation, through an index on its one bound column
    assert [(s.kind, s.predicate, s.columns) for s in plan.sources] == [
        (INDEX, "e", (1,)),
        (FACTS, "f", ()),
        (INDEX, "e", (0,)),
    ]


def run(plan, seed: list[tuple[int, ...]], facts: dict[str, set[tuple[int, ...]]]) -> set[tuple[int, ...]]:  # type: ignore[no-untyped-def]
    args = [seed if s.kind == SEED else facts[s.predicate] for s in plan.sources]
    return plan.function(*args)  # type: ignore[no-any-return]


def test_head_and_negative_seeds_bind_the_variables() -> None:
    program = analyzed("e(1). f(1).\np(X) :- e(X), !f(X).")
    rule = program.rules[0]
    head_seeded = compile_rule(rule, Seed(SEED_HEAD), program.predicates)
    assert run(head_seeded, [(1,), (2,), (3,)], {"e": {(1,), (3,)}, "f": {(3,)}}) == {(1,)}
    negative = compile_rule(rule, Seed(SEED_NEGATIVE, 1), program.predicates)
    assert run(negative, [(1,), (5,)], {"e": {(1,), (5,)}, "f": {(5,)}}) == {(1,)}


def test_relation_indexes_follow_adds_and_removes() -> None:
    relation = Relation("r", 2)
    relation.add({(1, "a"), (1, "b")})
    index = relation.index((0,))
    assert sorted(index[1]) == [(1, "a"), (1, "b")]
    relation.add({(2, "c")})
    assert list(index[2]) == [(2, "c")]
    relation.remove({(2, "c"), (1, "a")})
    assert 2 not in index and list(index[1]) == [(1, "b")]
    assert relation.facts == {(1, "b")}
    relation.clear()
    assert len(relation) == 0 and relation.index((0,)) == {}


@pytest.mark.parametrize("text", [
    "Decl e(A, B, L).\ne(1, 0, []).\np(X) :- e(X, Y, L), :list:member(Z, L), fn:div(X, Y) < 3.\n",
    "Decl e(A, B, L).\ne(1, 0, []).\np(X, H) :- e(X, Y, L), :match_cons(L, H, T), 1 = fn:div(X, Y).\n",
    "Decl e(A, B, M).\ne(1, 0, fn:map()).\np(X, V) :- e(X, Y, M), :match_entry(M, /k, V), fn:div(X, Y) > 0.\n",
])  # fmt: skip
def test_a_check_that_may_fail_is_not_moved_ahead_of_a_literal_that_yields_no_row(text: str) -> None:
    """Found by an attack: a comparison that divides by zero, run before ``:list:member`` of an empty list, raised
    where the rule meets no row at all. Only checks that cannot fail (membership tests, negations) move ahead."""
    for after in (0, None):
        engine = Engine(Program.parse(text))
        engine.steps_after = after
        assert engine.all_facts()["p"] == []
