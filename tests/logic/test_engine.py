"""The Python API: facts in and out, queries, limits, externals, incremental bookkeeping."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.logic import AnalysisError, Engine, EvaluationError, FactError, Float, List, Name, Program

REACH = """
Decl edge(X, Y) bound [/number, /number].
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
"""


def engine_for(text: str, **kwargs: object) -> Engine:
    return Engine(Program.parse(text, source="test.mg"), **kwargs)  # type: ignore[arg-type]


def test_readme_example() -> None:
    engine = engine_for(REACH)
    engine.assert_facts("edge", [(1, 2), (2, 3)])
    engine.evaluate()
    assert engine.query("path(1, X)") == [(1, 2), (1, 3)]
    engine.retract_facts("edge", [(2, 3)])
    engine.evaluate()
    assert engine.query("path(X, Y)") == [(1, 2)]


def test_query_patterns() -> None:
    engine = engine_for('p(1, 1, /a). p(1, 2, /a). p(2, 2, /b). p(3, 4, "s").')
    engine.evaluate()
    assert engine.query("p(X, X, _)") == [(1, 1, Name("/a")), (2, 2, Name("/b"))]
    assert engine.query("p(_, _, /a)") == [(1, 1, Name("/a")), (1, 2, Name("/a"))]
    assert engine.query('p(3, Y, "s")') == [(3, 4, "s")]
    assert engine.query("p(fn:plus(1, 2), _, _)") == [(3, 4, "s")]
    with pytest.raises(FactError, match="could not find predicate nope"):
        engine.query("nope(X)")
    with pytest.raises(FactError, match="has 3 arguments"):
        engine.query("p(X)")


def test_query_evaluates_pending_changes() -> None:
    engine = engine_for(REACH)
    engine.assert_facts("edge", [(5, 6)])
    assert engine.query("path(5, X)") == [(5, 6)]
    assert engine.facts("edge") == [(5, 6)]


def test_assert_checks_predicate_arity_values_and_bounds() -> None:
    engine = engine_for(REACH)
    with pytest.raises(FactError, match="could not find predicate nope"):
        engine.assert_facts("nope", [(1,)])
    with pytest.raises(FactError, match="edge has 2 arguments, got 3"):
        engine.assert_facts("edge", [(1, 2, 3)])
    with pytest.raises(FactError, match="does not match the declared bound"):
        engine.assert_facts("edge", [("a", 2)])
    with pytest.raises(FactError, match="bad value"):
        engine.assert_facts("edge", [(True, 2)])
    assert engine.assert_facts("edge", [(1, 2), (1, 2)]) == 1
    assert engine.retract_facts("edge", [(1, 2), (7, 7)]) == 1
    unchecked = engine_for(REACH, check_bounds=False)
    unchecked.assert_facts("edge", [("a", "b")])
    assert unchecked.query("path(X, Y)") == [("a", "b")]


def test_python_values_are_converted() -> None:
    engine = engine_for("Decl v(X).\nlen(N) :- v(L), N = fn:list:len(L).")
    engine.assert_facts("v", [([1, 2.5, Name("/n")],)])
    assert engine.query("v(X)") == [(List([1, Float(2.5), Name("/n")]),)]
    assert engine.query("len(N)") == [(3,)]


def test_derived_fact_survives_retracting_its_base_copy() -> None:
    engine = engine_for(REACH)
    engine.assert_facts("edge", [(1, 2), (2, 3)])
    engine.assert_facts("path", [(1, 3)])  # also derivable
    engine.evaluate()
    engine.retract_facts("path", [(1, 3)])
    engine.evaluate()
    assert (1, 3) in engine.query("path(X, Y)")
    engine.retract_facts("edge", [(2, 3)])
    engine.evaluate()
    assert engine.query("path(X, Y)") == [(1, 2)]


def test_assert_then_retract_before_evaluate_is_no_change() -> None:
    engine = engine_for(REACH)
    engine.assert_facts("edge", [(1, 2)])
    engine.evaluate()
    engine.assert_facts("edge", [(2, 3)])
    engine.retract_facts("edge", [(2, 3)])
    assert not engine.pending
    stats = engine.evaluate()
    assert stats.mode == "incremental" and stats.strata_updated == 0


def test_incremental_work_is_proportional_to_the_change() -> None:
    engine = engine_for(REACH)
    engine.assert_facts("edge", [(i, i + 1) for i in range(200)])
    full = engine.evaluate()
    assert full.mode == "full" and full.created == 200 * 201 // 2
    engine.assert_facts("edge", [(1000, 1001)])
    stats = engine.evaluate()
    assert stats.mode == "incremental" and stats.created == 2  # edge and path(1000, 1001), nothing else
    assert engine.evaluate(full=True).mode == "full"


def test_created_fact_limit_aborts_and_next_evaluate_starts_afresh() -> None:
    engine = engine_for(REACH, created_fact_limit=50)
    engine.assert_facts("edge", [(i, i + 1) for i in range(20)])
    with pytest.raises(EvaluationError, match="created-fact limit of 50 reached"):
        engine.evaluate()
    engine.created_fact_limit = None
    engine.retract_facts("edge", [(i, i + 1) for i in range(10, 20)])
    assert engine.evaluate().mode == "full"
    assert len(engine.query("path(X, Y)")) == 55


def test_unbounded_program_is_stopped_by_the_limit() -> None:
    engine = engine_for("n(0).\nn(Y) :- n(X), Y = fn:plus(X, 1).", created_fact_limit=1000)
    with pytest.raises(EvaluationError, match="created-fact limit"):
        engine.evaluate()


def test_runtime_errors_name_the_clause() -> None:
    engine = engine_for("q([1]).\np(X) :- q(L), X = fn:list:get(L, 5).")
    with pytest.raises(EvaluationError) as info:
        engine.evaluate()
    assert "index 5 out of range" in info.value.message
    assert info.value.position is not None and info.value.position.line == 2


def test_comparing_non_numbers_is_an_error() -> None:
    engine = engine_for('q("a"). q("b").\np(X) :- q(X), q(Y), X < Y.')
    with pytest.raises(EvaluationError, match=":lt expects numbers"):
        engine.evaluate()


def test_analysis_errors_are_all_reported_together() -> None:
    with pytest.raises(AnalysisError) as info:
        engine_for("p(X) :- q(X).\nr(Y).\n")
    messages = [d.message for d in info.value.diagnostics]
    assert any("could not find predicate q/1" in m for m in messages)
    assert any("variable Y in fact r" in m for m in messages)


EXTERNAL = """
Decl divides(D, N) descr [external(), mode("+", "+")].
Decl split(S, Part) descr [external(), mode("+", "-")].
n(2). n(3). n(6).
divisor(D, N) :- n(D), n(N), D != N, divides(D, N).
word(W) :- split("a b  c", W).
"""


def split_words(text: str) -> Iterator[str]:
    yield from text.split()


def test_external_predicates() -> None:
    engine = engine_for(EXTERNAL, externals={"divides": lambda d, n: n % d == 0, "split": split_words})
    engine.evaluate()
    assert engine.query("divisor(D, N)") == [(2, 6), (3, 6)]
    assert engine.query("word(W)") == [("a",), ("b",), ("c",)]


def test_external_errors_are_reported() -> None:
    engine = engine_for(EXTERNAL)
    with pytest.raises(EvaluationError, match="divides has no registered function"):
        engine.evaluate()
    engine = engine_for(EXTERNAL, externals={"divides": lambda d, n: 1 / 0, "split": split_words})
    with pytest.raises(EvaluationError, match="raised ZeroDivisionError"):
        engine.evaluate()
    engine = engine_for(EXTERNAL, externals={"divides": lambda d, n: True, "split": lambda s: [("x", "y")]})
    with pytest.raises(EvaluationError, match="returned 2 values, expected 1"):
        engine.evaluate()
    with pytest.raises(FactError, match="not declared with descr"):
        engine.register_external("n", lambda: True)


def test_external_needs_a_mode() -> None:
    with pytest.raises(AnalysisError, match="needs a mode"):
        engine_for("Decl f(X) descr [external()].\np(X) :- f(X).")


def test_generated_code_never_contains_program_text() -> None:
    engine = engine_for('q("__import__(\'os\')"). p(X) :- q(X), X != "os.system".')
    engine.evaluate()
    assert engine.query("p(X)") == [("__import__('os')",)]
    assert all("os" not in code for code in engine.plans())


def test_packages_prefix_and_use_makes_visible() -> None:
    lib = Program.parse("Package net!\nlink(1, 2).\nreach(X, Y) :- link(X, Y).\n", source="net.mg")
    user = Program.parse("Use net!\nfar(X) :- net.reach(X, _).\n", source="user.mg")
    engine = Engine(lib + user)
    assert engine.query("far(X)") == [(1,)]
    assert engine.query("net.reach(X, Y)") == [(1, 2)]
    stranger = Program.parse("near(X) :- net.reach(X, _).\n", source="stranger.mg")
    with pytest.raises(AnalysisError, match="belongs to package net; add 'Use net!'"):
        Engine(lib + stranger)


def test_unsorted_retrieval_returns_the_same_facts() -> None:
    engine = engine_for(REACH)
    engine.assert_facts("edge", [(3, 1), (1, 2), (2, 3)])
    assert sorted(engine.facts("path", sort=False)) == engine.facts("path")
    assert sorted(engine.query("path(1, X)", sort=False)) == engine.query("path(1, X)") == [(1, 1), (1, 2), (1, 3)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), max_size=30),
       st.dictionaries(st.integers(0, 2), st.integers(0, 3), max_size=3))  # fmt: skip
def test_lookup_by_value_finds_what_the_parsed_query_finds(
    rows: list[tuple[int, int, int]], bound: dict[int, int]
) -> None:
    """``Engine.lookup`` (values by column, no pattern to parse: what the runtime's guards use) answers as
    ``query`` does for the same pattern."""
    engine = Engine(Program.parse("Decl t(A, B, C) bound [/number, /number, /number].\nu(A, B, C) :- t(A, B, C).\n"))
    engine.assert_facts("t", rows)
    pattern = "u(" + ", ".join(str(bound[i]) if i in bound else "_" for i in range(3)) + ")"
    assert sorted(engine.lookup("u", bound)) == engine.query(pattern)
