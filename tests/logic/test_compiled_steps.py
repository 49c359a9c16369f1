"""The compiled incremental step (``logic/schedule.py``) derives what the generic loop derives.

- on random programs and random sequences of insertions and retractions, an engine that compiles every step at first
  sight holds, after each evaluation, exactly what an engine that never compiles holds — and what evaluating from
  scratch gives; suppositions leave no trace either way
- the MCP guard's shipped policy with a user's rules (negations, an aggregate) and a session's provenance facts: the
  same verdict and reasons on random calls, compiled or not
- the generated text holds no program text; a built-in's failure in a compiled step names the clause; an external
  registered again is the one a compiled step calls
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groundstate.logic import Engine, EvaluationError, List, Program

from .test_properties import SETTINGS, GeneratedProgram, edges, nodes, operations, programs, run_engine


def engines(text: str, e: set[tuple[int, int]], f: set[int]) -> tuple[Engine, Engine]:
    """The same program and facts, evaluated once: one engine compiling every step at first sight, one never."""
    pair = []
    for after in (0, None):
        engine = Engine(Program.parse(text))
        engine.steps_after = after
        engine.assert_facts("e", e)
        engine.assert_facts("f", [(x,) for x in f])
        engine.evaluate()
        pair.append(engine)
    return pair[0], pair[1]


@SETTINGS
@given(programs(), edges, nodes, operations)
def test_a_compiled_step_derives_what_the_generic_loop_derives(
    program: GeneratedProgram, e: set[tuple[int, int]], f: set[int], ops: list[tuple[str, str, list[Any], bool]]
) -> None:
    text = program.text()
    compiled, generic = engines(text, e, f)
    current: dict[str, set[Any]] = {"e": set(e), "f": {(x,) for x in f}}
    for op, pred, pairs, _ in ops:
        rows = pairs if pred == "e" else [(a,) for a, _ in pairs]
        for engine in (compiled, generic):
            (engine.assert_facts if op == "assert" else engine.retract_facts)(pred, rows)
        current[pred] = current[pred] | set(rows) if op == "assert" else current[pred] - set(rows)
        assert compiled.evaluate().mode == generic.evaluate().mode == "incremental"
        assert compiled.all_facts() == generic.all_facts()
        assert compiled.all_facts() == run_engine(text, current["e"], {x for (x,) in current["f"]})


@SETTINGS
@given(programs(), edges, nodes, st.lists(st.tuples(edges, nodes), min_size=1, max_size=4))
def test_a_compiled_supposition_holds_what_the_generic_one_holds_and_leaves_no_trace(
    program: GeneratedProgram, e: set[tuple[int, int]], f: set[int], suppositions: list[tuple[set[Any], set[int]]]
) -> None:
    text = program.text()
    compiled, generic = engines(text, e, f)
    before = generic.all_facts()
    for more_e, more_f in suppositions:
        supposed = {"e": more_e, "f": [(x,) for x in more_f]}
        with compiled.supposing(supposed), generic.supposing(supposed):
            assert compiled.all_facts() == generic.all_facts() == run_engine(text, e | more_e, f | more_f)
        assert compiled.all_facts() == before
    if any(more_e - e or more_f - f for more_e, more_f in suppositions):  # some supposition added facts
        assert any(callable(step) for step in compiled._steps.values())


def test_the_steps_are_compiled_once_seen_and_the_generic_loop_is_kept_for_retractions() -> None:
    engine = Engine(Program.parse("Decl e(A, B). Decl f(A). p(X) :- e(X, Y), !f(Y). q(X) :- p(X), f(X)."))
    engine.evaluate()
    for value in range(3):
        engine.assert_facts("e", [(value, value + 1)])
        engine.evaluate()
    [step] = engine._steps.values()
    assert callable(step), "an insertion seen twice is compiled"
    engine.retract_facts("e", [(0, 1)])
    engine.evaluate()
    assert list(engine._steps) == [frozenset({"e"})], "a retraction is not compiled"
    assert engine.query("p(X)") == [(1,), (2,)]


def test_the_generated_text_holds_no_program_text() -> None:
    text = """
    Decl e(A, B). Decl f(A).
    secret_predicate_name(X, Msg) :- e(X, Y), !f(Y), Msg = fn:string:concat("os.system('rm -rf /')", X).
    Decl shown(X, N).
    shown(X, N) :- secret_predicate_name(X, M) |> do fn:group_by(X), let N = fn:count().
    """
    engine = Engine(Program.parse(text))
    engine.steps_after = 0
    engine.evaluate()
    engine.assert_facts("e", [(1, 2)])
    engine.evaluate()
    source = getattr(engine._steps[frozenset({"e"})], "source")  # noqa: B009 - set on the generated function
    for fragment in ("secret_predicate_name", "os.system", "rm -rf", "shown", '"e"', "'e'", "concat"):
        assert fragment not in source
    assert engine.query("shown(X, N)") == [(1, 1)]


def test_a_builtin_failing_in_a_compiled_step_names_the_clause() -> None:
    engine = Engine(Program.parse("Decl e(A, B).\nr(Z) :- e(X, Y), Z = fn:div(X, Y).\n"))
    engine.steps_after = 0
    engine.evaluate()
    engine.assert_facts("e", [(4, 2)])
    engine.evaluate()
    assert engine.query("r(Z)") == [(2,)]
    engine.assert_facts("e", [(1, 0)])
    with pytest.raises(EvaluationError, match=r"in the clause r\(Z\) :- e\(X, Y\)") as caught:
        engine.evaluate()
    assert caught.value.position is not None and caught.value.position.line == 2


def test_an_external_registered_again_is_the_one_a_compiled_step_calls() -> None:
    text = "Decl e(A, B).\nDecl twice(X, Y) descr [external(), mode(\"+\", \"-\")].\nr(Y) :- e(X, _), twice(X, Y).\n"
    engine = Engine(Program.parse(text), externals={"twice": lambda x: [(x * 2,)]})
    engine.steps_after = 0
    engine.evaluate()
    engine.assert_facts("e", [(1, 0)])
    engine.evaluate()
    engine.register_external("twice", lambda x: [(x * 3,)])
    engine.assert_facts("e", [(2, 0)])
    engine.evaluate()
    assert engine.query("r(Y)") == [(2,), (6,)]


def test_a_compiled_step_counts_what_it_creates_against_the_engines_limit() -> None:
    engine = Engine(Program.parse("Decl e(A, B).\nr(X, Y) :- e(X, Y).\ns(X) :- r(X, _).\n"), created_fact_limit=5)
    engine.steps_after = 0
    engine.evaluate()
    engine.assert_facts("e", [(1, 1)])
    engine.evaluate()
    assert engine.query("s(X)") == [(1,)]
    engine.assert_facts("e", [(2, 2), (3, 3)])
    with pytest.raises(EvaluationError, match="created-fact limit of 5 reached"):
        engine.evaluate()


@pytest.mark.parametrize("limit", [None, 14, 15])
def test_a_step_with_a_generic_stratum_inside_counts_every_created_fact_once(limit: int | None) -> None:
    """The compiled strata count what they create in a local and hand the count to a generic stratum (a recursive one
    here) and back: the count, and where the limit stops the evaluation, are the generic loop's. Three chain edges
    create 15 facts: 3 of ``e``, 3 of ``r``, 6 of ``path`` (generic) and 3 of ``top`` (compiled again)."""
    text = ("Decl e(A, B).\nr(X, Y) :- e(X, Y).\npath(X, Y) :- r(X, Y).\npath(X, Z) :- path(X, Y), r(Y, Z).\n"
            "top(X) :- path(X, _).\n")  # fmt: skip
    outcomes: list[int | str] = []
    for after in (0, None):
        engine = Engine(Program.parse(text), created_fact_limit=limit)
        engine.steps_after = after
        engine.evaluate()
        engine.assert_facts("e", [(0, 0)])
        engine.evaluate()  # seen once: the next insertion into e runs the compiled step
        engine.assert_facts("e", [(1, 2), (2, 3), (3, 4)])
        try:
            outcomes.append(engine.evaluate().created)
        except EvaluationError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] == 15 if limit is None or limit >= 15 else "created-fact limit of 14" in str(outcomes[0])


# -- found by an attack on the compiled step (each fails on the first version of schedule.py) ----------------------


def outcome(engine: Engine, facts: dict[str, list[tuple[Any, ...]]]) -> str:
    """What asserting ``facts`` and evaluating gives: the facts derived, or the error's kind."""
    for predicate, rows in facts.items():
        engine.assert_facts(predicate, rows)
    try:
        engine.evaluate()
    except EvaluationError as exc:
        return type(exc).__name__
    return repr(engine.all_facts())


@pytest.mark.parametrize("after", [0, 1])
def test_a_plan_is_not_skipped_past_a_filter_that_fails(after: int) -> None:
    """A plan whose division runs before the atom that reads an empty relation is not skipped: the reference
    evaluation raises, and so does the compiled step (skipping it hid the error, and the guard permitted)."""
    text = "Decl e(A, B). Decl f(A).\nr(Y) :- f(Y), D = fn:div(4, Y), e(Y, D).\n"
    results = []
    for steps_after in (after, None):
        engine = Engine(Program.parse(text))
        engine.steps_after = steps_after
        engine.evaluate()
        outcome(engine, {"f": [(2,)]})  # seen once: compiled at the next one when after is 1
        results.append(outcome(engine, {"f": [(0,)]}))
    assert results == ["EvaluationError", "EvaluationError"]


def test_a_supposition_is_counted_once_and_none_turns_compiled_steps_off() -> None:
    text = "Decl e(A, B). Decl f(A).\nr(Y) :- f(Y), D = fn:div(4, Y), e(Y, D).\n"
    engine = Engine(Program.parse(text))
    engine.evaluate()
    with engine.supposing({"f": [(1,)]}):
        pass
    assert not engine._steps, "one supposition is one sighting: compiled at the second"
    with engine.supposing({"f": [(2,)]}):
        pass
    assert list(engine._steps) == [frozenset({"f"})]
    engine.steps_after = None
    calls: list[Any] = []
    step = engine._steps[frozenset({"f"})]

    def counted(*args: Any) -> None:
        calls.append(args)
        step(*args)

    engine._steps[frozenset({"f"})] = counted
    with engine.supposing({"f": [(3,)]}):
        pass
    engine.assert_facts("f", [(4,)])
    engine.evaluate()
    assert calls == [], "steps_after None: the generic loop alone"


@pytest.mark.alone
def test_ever_new_sets_of_predicates_do_not_make_every_evaluation_compile() -> None:
    """400 sets of predicates, each supposed twice: the steps are kept least recently used first, at most 256, and
    compiling takes at most 50 ms plus a tenth of the time spent evaluating — not a compilation per supposition."""
    import itertools

    lines = [f"Decl b{i}(A, B)." for i in range(9)] + [f"w(X) :- b{i}(X, _)." for i in range(9)]
    lines += [f"c{j + 1}(X) :- c{j}(X), w(X)." for j in range(60)] + ["c0(X) :- w(X)."]  # each compile costs
    engine = Engine(Program.parse("\n".join(lines)))
    engine.steps_after = 0
    engine.evaluate()
    subsets = [s for r in range(1, 10) for s in itertools.combinations(range(9), r)][:400]
    for number in range(2):
        for subset in subsets:
            with engine.supposing({f"b{i}": [(number, i)] for i in subset}):
                assert engine.query("c60(X)") == [(number,)]
    assert len(engine._steps) <= 256
    assert 0 < engine._compiles < 800
    # each compilation starts within the budget, so only the last one's own time can be past it
    assert engine._compile_seconds <= 0.05 + 0.1 * engine._evaluated + engine._compile_longest


def test_an_engine_with_a_time_limit_compiles_nothing() -> None:
    """A shadow policy's engine: compiling is not counted against its time limit, so it does not compile."""
    engine = Engine(Program.parse("Decl e(A, B).\nr(X) :- e(X, _).\n"), time_limit=5.0)
    engine.steps_after = 0
    engine.evaluate()
    for value in range(3):
        with engine.supposing({"e": [(value, value)]}):
            assert engine.query("r(X)") == [(v,) for v in range(value + 1)]
        engine.assert_facts("e", [(value, value)])
        engine.evaluate()
    assert not engine._steps and engine._compiles == 0


def test_a_step_reaching_thousands_of_strata_is_left_to_the_generic_loop() -> None:
    lines = ["Decl e(A).", "p0(X) :- e(X), X > 1000000."] + [f"p{i + 1}(X) :- p{i}(X)." for i in range(200)]
    engine = Engine(Program.parse("\n".join(lines)))
    engine.steps_after = 0
    engine.evaluate()
    with engine.supposing({"e": [(0,)]}):
        pass
    assert not engine._steps
    with engine.supposing({"e": [(2000000,)]}):
        assert engine.query("p200(X)") == [(2000000,)]


def test_compiling_builds_no_index_the_evaluation_does_not_read() -> None:
    text = ("Decl e(A, B). Decl big(A, B). Decl rare(A).\nrare(X) :- e(X, Y), Y > 1000000.\n"
            "hit(X, Z) :- big(X, Z), rare(X).\n")
    engine = Engine(Program.parse(text))
    engine.steps_after = 0
    engine.assert_facts("big", [(i, i) for i in range(100)])
    engine.evaluate()
    for value in range(3):
        engine.assert_facts("e", [(value, value)])
        engine.evaluate()
    assert engine._steps and not engine.relations["big"].indexes


@pytest.mark.parametrize("limit", [float("inf"), float("nan")])
def test_a_limit_that_is_no_integer_does_not_break_a_compiled_step(limit: float) -> None:
    engine = Engine(Program.parse("Decl e(A, B).\nr(X) :- e(X, _).\n"), created_fact_limit=limit)  # type: ignore[arg-type]
    engine.steps_after = 0
    engine.evaluate()
    for value in range(3):
        engine.assert_facts("e", [(value, value)])
        engine.evaluate()
    assert engine.query("r(X)") == [(0,), (1,), (2,)]


def test_a_limit_changed_after_compiling_is_the_one_obeyed() -> None:
    engine = Engine(Program.parse("Decl e(A, B).\nr(X) :- e(X, _).\n"))
    engine.steps_after = 0
    engine.evaluate()
    engine.assert_facts("e", [(1, 1)])
    engine.evaluate()
    engine.created_fact_limit = 1
    engine.assert_facts("e", [(2, 2)])
    with pytest.raises(EvaluationError, match="created-fact limit of 1 reached"):
        engine.evaluate()


def test_the_error_a_compiled_step_reports_is_the_generic_loops() -> None:
    """Two rules that fail on the same call: the compiled step runs them in the order the generic loop meets the
    changed predicates (lowest stratum first), so the same error is reported, compiled or not."""
    text = ("Decl ab(A). Decl mm(A).\naa(X) :- mm(X), !ab(X).\nr(X) :- ab(X), Z = fn:div(1, X).\n"
            "r(X) :- aa(X), :string:starts_with(X, \"a\").\n")
    messages = []
    for after in (0, None):
        engine = Engine(Program.parse(text))
        engine.steps_after = after
        engine.evaluate()
        for _ in range(3):  # seen, compiled, run compiled
            with pytest.raises(EvaluationError) as caught, engine.supposing({"ab": [(0,)], "mm": [(5,)]}):
                pass
            messages.append(str(caught.value))
    assert "fn:div" in messages[0]
    assert len(set(messages)) == 1


@pytest.mark.parametrize("supposed", [
    [(9, 1, "a")],  # a new group of one row: its head built at once
    [(9, 1, "a"), (9, 2, "b")],  # a new group of two rows: collected in order
    [(1, 5, "z")],  # a row joining a group that exists
    [(8, "fn:list", "x")],  # a collected value that is itself a list
])  # fmt: skip
def test_a_supposition_opening_a_group_collects_what_evaluating_from_scratch_collects(supposed: list[Any]) -> None:
    """Kept aggregates whose lets collect one variable each (the guard's verdict) build the head of a group that a
    supposition opens with one row directly: it must be the head a whole evaluation builds — one-item lists, in the
    head's order, a nested value included."""
    rules = ("Decl r(X, Y, Z).\n"
             "both(X, Ys, Zs) :- r(X, Y, Z) |> do fn:group_by(X), let Zs = fn:collect(Z), let Ys = fn:collect(Y).\n"
             "ys(X, Ys) :- r(X, Y, _) |> do fn:group_by(X), let Ys = fn:collect(Y).\n")  # fmt: skip
    rows: list[tuple[Any, ...]] = [(1, 3, "c"), (2, 4, "d")]
    made: list[tuple[Any, ...]] = [(x, List((7,)) if y == "fn:list" else y, z) for x, y, z in supposed]
    held = []
    for after in (0, None):
        engine = Engine(Program.parse(rules))
        engine.steps_after = after
        engine.assert_facts("r", rows)
        engine.evaluate()
        for _ in range(2):  # the second time through the compiled step
            with engine.supposing({"r": made}):
                held.append(engine.all_facts())
    scratch = Engine(Program.parse(rules))
    scratch.assert_facts("r", rows + made)
    scratch.evaluate()
    assert all(facts == scratch.all_facts() for facts in held)


@pytest.mark.parametrize("supposed", [[(1, "b")], [(2, "a")], [(1, "b"), (3, "c")]])
def test_a_head_a_group_loses_reaches_the_strata_above_it(supposed: list[tuple[Any, ...]]) -> None:
    """A supposed row that joins an existing group replaces the group's head (a count of 1 becomes 2), and one under a
    negation takes a stored head away (``unmarked(1)``, worked out by the generic step): the strata above must see
    what went — a positive reader's groups shrink, a head blocked by a fact that went comes back —
    though everything else in the step only inserted."""
    rules = ("Decl r(X, Y).\nDecl f(X).\n"
             "n(X, N) :- r(X, _) |> do fn:group_by(X), let N = fn:count().\n"
             "single(X) :- f(X), !n(X, 1).\n"
             "sizes(N, K) :- n(_, N) |> do fn:group_by(N), let K = fn:count().\n"
             'unmarked(X) :- f(X), !r(X, "b").\nmarked(X) :- f(X), !unmarked(X).\n')  # fmt: skip
    held = []
    for after in (0, None):
        engine = Engine(Program.parse(rules))
        engine.steps_after = after
        engine.assert_facts("r", [(1, "a"), (3, "a")])
        engine.assert_facts("f", [(1,), (2,), (3,)])
        engine.evaluate()
        for _ in range(2):  # the second time through the compiled step
            with engine.supposing({"r": supposed}):
                held.append(engine.all_facts())
    scratch = Engine(Program.parse(rules))
    scratch.assert_facts("r", [(1, "a"), (3, "a"), *supposed])
    scratch.assert_facts("f", [(1,), (2,), (3,)])
    scratch.evaluate()
    assert all(facts == scratch.all_facts() for facts in held)
