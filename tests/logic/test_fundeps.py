"""Functional dependencies declared in a Decl (``fundep([Key...], [Dependent...])``) and held by the engine after
every evaluation — full, incremental and supposed — with an error naming the clash and where the Decl is."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.errors import PolicyError
from groundstate.logic import AnalysisError, Engine, FunctionalDependencyError, Name, Program

POLICY = """
Decl source(Run, Agent, Note) bound [/name, /name, /string].
Decl lead(Run, Agent, Note) descr [fundep([Run], [Agent])] bound [/name, /name, /string].
Decl phase(Phase) descr [fundep([], [Phase])] bound [/name].
lead(R, A, N) :- source(R, A, N).
phase(/busy) :- source(/r2, _, _).
phase(/idle) :- source(/r3, _, _).
"""


def engine() -> Engine:
    return Engine(Program.parse(POLICY, source="policy.mg"))


def row(run: str, agent: str, note: str) -> list[object]:
    return [Name.of(run), Name.of(agent), note]


def test_facts_that_agree_on_the_key_and_the_dependent_are_kept() -> None:
    """The dependent side is all that must agree: two notes of one (run, agent) are fine."""
    held = engine()
    held.assert_facts("source", [row("r", "a", "one"), row("r", "a", "two"), row("q", "b", "three")])
    held.evaluate()
    assert len(held.facts("lead")) == 3


def test_an_incremental_evaluation_that_breaks_a_fundep_is_refused_naming_the_decl() -> None:
    held = engine()
    held.assert_facts("source", [row("r", "a", "one")])
    held.evaluate()
    held.assert_facts("source", [row("r", "b", "two")])
    with pytest.raises(FunctionalDependencyError) as refused:
        held.evaluate()
    message = str(refused.value)
    assert "policy.mg:3:" in message and "lead breaks its fundep([Run], [Agent])" in message
    assert 'lead(/r, /a, "one") and lead(/r, /b, "two")' in message
    assert isinstance(refused.value, PolicyError)  # a policy that breaks its own declaration


def test_a_full_evaluation_and_an_empty_key_are_checked_too() -> None:
    held = engine()
    held.assert_facts("source", [row("r2", "a", "x"), row("r3", "a", "y")])
    with pytest.raises(FunctionalDependencyError, match=r"phase breaks its fundep\(\[\], \[Phase\]\)"):
        held.evaluate(full=True)


def test_a_supposition_that_breaks_a_fundep_is_refused_and_leaves_nothing_behind() -> None:
    held = engine()
    held.assert_facts("source", [row("r", "a", "one")])
    held.evaluate()
    with pytest.raises(FunctionalDependencyError), held.supposing({"source": [row("r", "b", "two")]}):
        pass
    assert held.facts("lead") == [(Name.of("r"), Name.of("a"), "one")]


@pytest.mark.parametrize(
    ("descriptor", "problem"),
    [("fundep([A], [Z])", "Z is not one of A, B"), ("fundep([A], [])", "must be non-empty"),
     ("fundep([A], [A])", "share no argument"), ("fundep(A, [B])", "write fundep([KeyArgument"),
     ("fundep([A])", "write fundep([KeyArgument")],
)  # fmt: skip
def test_a_malformed_fundep_is_a_positioned_analysis_error(descriptor: str, problem: str) -> None:
    with pytest.raises(AnalysisError, match=re.escape(problem)) as refused:
        Engine(Program.parse(f"Decl p(A, B) descr [{descriptor}].\np(1, 2).\n", source="bad.mg"))
    assert "bad.mg:1:" in str(refused.value)


rows = st.lists(st.tuples(st.sampled_from("rst"), st.sampled_from("abc"), st.sampled_from("xyz")), max_size=8)


@settings(max_examples=150, deadline=None)
@given(first=rows, second=rows)
def test_the_engine_refuses_exactly_the_states_a_brute_force_check_refuses(
    first: list[tuple[str, str, str]], second: list[tuple[str, str, str]]
) -> None:
    """Facts asserted in two evaluations (the second incremental): refused iff some run has two agents."""
    held = engine()
    for batch, seen in ((first, first), (second, first + second)):
        held.assert_facts("source", [row(*fact) for fact in batch])
        broken = any(len({agent for run2, agent, _ in seen if run2 == run}) > 1 for run, _, _ in seen)
        if broken:
            with pytest.raises(FunctionalDependencyError):
                held.evaluate()
            return
        held.evaluate()
