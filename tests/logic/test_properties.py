"""Properties of evaluation over generated programs and data.

- compiled semi-naive evaluation = the naive reference evaluator
- clause order and body order do not change results
- any sequence of asserts and retracts, evaluated incrementally = evaluating from scratch
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundstate.logic import Engine, Program

from . import reference

VARS = ["X", "Y", "Z", "W"]
IDB = ["p1", "p2", "p3", "p4"]


@dataclass
class GeneratedProgram:
    arity: dict[str, int]
    rules: list[tuple[str, list[str], list[str]]]  # head, positive/negative literals, comparisons

    def text(self, rng: random.Random | None = None) -> str:
        lines = [f"Decl {p}({', '.join('ABC'[:n])})." for p, n in self.arity.items()]
        rules = list(self.rules)
        if rng is not None:
            rng.shuffle(rules)
        for head, body, tests in rules:
            body = list(body)
            if rng is not None:
                rng.shuffle(body)
            if "|>" in head:  # an aggregating rule: kept whole
                lines.append(head)
                continue
            lines.append(f"{head} :- " + ", ".join(body + tests) + ".")
        return "\n".join(lines) + "\n"


@st.composite
def programs(draw: st.DrawFn) -> GeneratedProgram:
    arity = {"e": 2, "f": 1}
    order = ["e", "f"]
    rules: list[tuple[str, list[str], list[str]]] = []
    for pred in IDB:
        arity[pred] = draw(st.integers(0, 2))
        usable = [*order, pred]  # positive: lower predicates and itself (recursion)
        for _ in range(draw(st.integers(1, 3))):
            positives = []
            bound: list[str] = []
            for _ in range(draw(st.integers(1, 3))):
                body_pred = draw(st.sampled_from(usable))
                args = []
                for _ in range(arity[body_pred]):
                    if draw(st.integers(0, 5)) == 0:
                        args.append(str(draw(st.integers(0, 3))))
                    else:
                        var = draw(st.sampled_from(VARS))
                        args.append(var)
                        bound.append(var)
                positives.append(f"{body_pred}({', '.join(args)})")
            if not bound and arity[pred] > 0:
                continue
            body = list(positives)
            if draw(st.booleans()) and len(order) > 0:
                neg_pred = draw(st.sampled_from(order))
                neg_args = [draw(st.sampled_from([*bound, "_"])) for _ in range(arity[neg_pred])]
                body.append(f"!{neg_pred}({', '.join(neg_args)})")
            tests = []
            if bound and draw(st.integers(0, 3)) == 0:
                a, b = draw(st.sampled_from(bound)), draw(st.sampled_from(bound))
                tests.append(f"{a} {draw(st.sampled_from(['<', '!=', '=', '>=']))} {b}")
            head_args = [draw(st.sampled_from(bound)) for _ in range(arity[pred])]
            rules.append((f"{pred}({', '.join(head_args)})", body, tests))
        order.append(pred)
    if draw(st.booleans()):
        rules += aggregating_rules(draw, order, arity)
    return GeneratedProgram(arity, rules)


def aggregating_rules(
    draw: st.DrawFn, order: list[str], arity: dict[str, int]
) -> list[tuple[str, list[str], list[str]]]:
    """An aggregate over the generated predicates (sometimes with a projected wildcard, a negation, two reducers),
    a rule negating it, and an aggregate over it."""
    rules: list[tuple[str, list[str], list[str]]] = []
    binary = [p for p in order if arity[p] == 2]
    reducer = draw(st.sampled_from(REDUCED))
    body = [f"{draw(st.sampled_from(binary))}(X, Y)"]
    if draw(st.booleans()):  # a second atom, its wildcard projected away: a row may have several derivations
        body.append(f"{draw(st.sampled_from(binary))}(Y, _)")
    if draw(st.booleans()):  # a negation: an inserted fact takes rows away
        body.append(f"!{draw(st.sampled_from([p for p in order if arity[p] == 1] or ['f']))}(Y)")
    head = "agg(X, N)"
    if draw(st.booleans()):
        reducer += ", let M = fn:count()"
        head = "agg(X, N, M)"
    rules.append((f"{head} :- {', '.join(body)} |> do fn:group_by(X), let N = {reducer}.", [], []))
    rules.append(("post(X)", ["f(X)", "!" + head.replace("N", "1").replace("M", "_")], []))
    sizes = head.replace("X", "_")
    rules.append((f"sizes(N, C) :- {sizes} |> do fn:group_by(N), let C = fn:count().", [], []))
    arity["agg"], arity["post"], arity["sizes"] = head.count(",") + 1, 1, 2
    return rules


REDUCED = ["fn:count()", "fn:sum(Y)", "fn:max(Y)", "fn:min(Y)", "fn:collect(Y)", "fn:collect_distinct(Y)"]


edges = st.sets(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=12)
nodes = st.sets(st.integers(0, 4), max_size=5)


def evaluated(text: str, e: set[tuple[int, int]], f: set[int]) -> Engine:
    """An engine for the program with the facts ``e`` and ``f``, evaluated once from scratch."""
    engine = Engine(Program.parse(text))
    engine.assert_facts("e", e)
    engine.assert_facts("f", [(x,) for x in f])
    engine.evaluate()
    return engine


def run_engine(text: str, e: set[tuple[int, int]], f: set[int]) -> dict[str, list[tuple[object, ...]]]:
    return evaluated(text, e, f).all_facts()


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(programs(), edges, nodes)
def test_semi_naive_equals_naive_reference(program: GeneratedProgram, e: set[tuple[int, int]], f: set[int]) -> None:
    text = program.text()
    expected = reference.sorted_facts(reference.evaluate(Program.parse(text), {"e": set(e), "f": {(x,) for x in f}}))
    assert run_engine(text, e, f) == expected


@SETTINGS
@given(programs(), edges, nodes, st.randoms(use_true_random=False))
def test_clause_and_body_order_do_not_change_results(
    program: GeneratedProgram, e: set[tuple[int, int]], f: set[int], rng: random.Random
) -> None:
    assert run_engine(program.text(rng), e, f) == run_engine(program.text(), e, f)


operations = st.lists(
    st.tuples(
        st.sampled_from(["assert", "retract"]),
        st.sampled_from(["e", "f"]),
        st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=3),
        st.booleans(),  # evaluate after this operation?
    ),
    min_size=1,
    max_size=8,
)


@SETTINGS
@given(programs(), edges, nodes, operations)
def test_incremental_equals_from_scratch(
    program: GeneratedProgram,
    e: set[tuple[int, int]],
    f: set[int],
    ops: list[tuple[str, str, list[tuple[int, int]], bool]],
) -> None:
    text = program.text()
    engine = evaluated(text, e, f)
    current_e, current_f = set(e), set(f)
    for op, pred, pairs, evaluate_now in ops:
        rows = pairs if pred == "e" else [(a,) for a, _ in pairs]
        if op == "assert":
            engine.assert_facts(pred, rows)
        else:
            engine.retract_facts(pred, rows)
        target = current_e if pred == "e" else current_f
        for row in rows:
            item = row if pred == "e" else row[0]
            if op == "assert":
                target.add(item)  # type: ignore[arg-type]
            else:
                target.discard(item)
        if evaluate_now:
            stats = engine.evaluate()
            assert stats.mode == "incremental"
            assert engine.all_facts() == run_engine(text, current_e, current_f)
    engine.evaluate()
    assert engine.all_facts() == run_engine(text, current_e, current_f)


@SETTINGS
@given(programs(), edges, nodes)
def test_a_time_limited_engine_derives_what_the_unlimited_one_derives(
    program: GeneratedProgram, e: set[tuple[int, int]], f: set[int]
) -> None:
    """Rules compiled to count their rows against a deadline (a shadow's, a replay's) are the same rules: the same
    facts, from scratch and after an incremental change."""
    text = program.text()
    limited = Engine(Program.parse(text), time_limit=60.0)
    limited.assert_facts("e", e)
    limited.assert_facts("f", [(x,) for x in f])
    limited.evaluate()
    assert limited.all_facts() == run_engine(text, e, f)
    removed = sorted(e)[:2]
    limited.retract_facts("e", removed)
    limited.evaluate()
    assert limited.all_facts() == run_engine(text, e - set(removed), f)
