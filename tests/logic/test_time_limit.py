"""An engine's time limit (``Engine(time_limit=...)``): for rules nobody has to obey — a shadow candidate, a replay's
candidate — whose evaluation must never hold up the real decision. A join that would run for hours is cut off at
the limit with an EvaluationLimitError naming the rule; an engine without a limit compiles its rules unwatched."""

from __future__ import annotations

import time

import pytest

from groundstate.logic import Engine, EvaluationLimitError, Program

EXPLOSIVE = """Decl start().
n(0) :- start().
n(M) :- n(N), :lt(N, 3000), M = fn:plus(N, 1).
never() :- n(A), n(B), n(C), X = fn:plus(A, B), Y = fn:plus(X, C), :lt(Y, -1).
"""  # 3000 cubed rows to join, deriving nothing: no fact limit is ever reached


def test_a_join_that_would_take_hours_is_cut_off_at_the_limit_naming_the_rule() -> None:
    engine = Engine(Program.parse(EXPLOSIVE, source="candidate.mg"), time_limit=0.2)
    engine.assert_facts("start", [()])
    started = time.monotonic()
    with pytest.raises(EvaluationLimitError) as raised:
        engine.evaluate()
    assert time.monotonic() - started < 5
    assert "took longer than its time limit of 0.2 s" in str(raised.value)
    assert raised.value.position is not None and raised.value.position.line == 4


def test_only_a_time_limited_engine_compiles_its_rules_watched() -> None:
    program = Program.parse("p(X) :- q(X).\nq(1).\n")
    plain, limited = Engine(program), Engine(program, time_limit=1.0)
    plain.evaluate()
    limited.evaluate()
    assert all("W(" not in code for code in plain.plans()) and any("W(" in code for code in limited.plans())
    assert plain.all_facts() == limited.all_facts()
