"""Value bounds in the engine's built-ins: a rule that doubles a string or nests a list each round ends in a
limit error naming the built-in, long before memory or the interpreter's stack run out."""

from __future__ import annotations

import pytest

from groundstate.errors import GroundstateError
from groundstate.logic import Engine, EvaluationLimitError, Program


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ('s("ab"). s(Y) :- s(X), Y = fn:string:concat(X, X).', "fn:string:concat: the result would exceed"),
        ("l(fn:list(1)). l(Y) :- l(X), Y = fn:list(X).", "fn:list: the result would be nested more than 32"),
        ("l(fn:list(1)). l(Y) :- l(X), Y = fn:list:append(X, X).", "fn:list:append: the result would"),
        (
            's("a"). s(Y) :- s(X), Y = fn:string:replace(X, "a", "aaaaaaaaaaaaaaaaaaaa", -1).',
            "fn:string:replace: the result would exceed",
        ),
    ],
)
def test_runaway_values_are_limit_errors(rule: str, message: str) -> None:
    engine = Engine(Program.parse(rule, source="runaway.mg"))
    with pytest.raises(EvaluationLimitError, match=message) as info:
        engine.evaluate()
    assert isinstance(info.value, GroundstateError) and "runaway.mg:1:" in str(info.value)


def test_values_within_the_bounds_still_work() -> None:
    engine = Engine(Program.parse('s("ab"). t(Y) :- s(X), Y = fn:string:concat(X, X, X).', source="ok.mg"))
    engine.evaluate()
    assert engine.query("t(Y)") == [("ababab",)]


@pytest.mark.parametrize("more", ["7", "/n", "1.5"])
def test_a_concatenation_counts_numbers_and_names_against_the_string_limit(more: str) -> None:
    """Found by an attack: only string pieces were counted, so a string of the limit's length and a number or a name
    made a longer one."""
    engine = Engine(Program.parse(f"Decl s(X).\nt(Y) :- s(X), Y = fn:string:concat(X, {more}).", source="long.mg"))
    engine.assert_facts("s", [("a" * 1_000_000,)])
    with pytest.raises(EvaluationLimitError, match="fn:string:concat: the result would exceed 1000000 characters"):
        engine.evaluate()
