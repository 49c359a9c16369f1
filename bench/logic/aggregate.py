"""A single-fact update under an aggregate: a 1,000-edge chain, its transitive closure (500,500 paths) and how many
nodes each node reaches (``fn:count`` per node). One edge is added at the end of the chain, then taken away, again
and again: groundstate's incremental maintenance (the closure by delete-rederive, the counts group by group)
against evaluating the same program from scratch, and against clingo grounding and solving it (``#count``) —
clingo has no incremental mode for this, so its time is a whole re-evaluation.

    python bench/logic/aggregate.py            # chain of 1,000, 10 updates
    python bench/logic/aggregate.py --quick    # chain of 200, 4 updates

Every answer is checked: after each update the counts of every node equal the from-scratch evaluation's and
clingo's, and the closed form (node i reaches n - i nodes, n the chain's end).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

from groundstate.logic import Engine, Program

RULES = """
Decl edge(X, Y).
path(X, Y) :- edge(X, Y).
path(X, Z) :- edge(X, Y), path(Y, Z).
reach_count(X, N) :- path(X, Y) |> do fn:group_by(X), let N = fn:count().
"""

CLINGO_RULES = """
path(X, Y) :- edge(X, Y).
path(X, Z) :- edge(X, Y), path(Y, Z).
reach_count(X, N) :- path(X, _), N = #count { Y : path(X, Y) }.
#show reach_count/2.
"""


def counts_from_scratch(edges: list[tuple[int, int]]) -> tuple[dict[int, int], float]:
    started = time.perf_counter()
    engine = Engine(Program.parse(RULES))
    engine.assert_facts("edge", edges)
    engine.evaluate()
    answer = dict(engine.facts("reach_count", sort=False))
    return answer, time.perf_counter() - started


def counts_by_clingo(edges: list[tuple[int, int]]) -> tuple[dict[int, int], float]:
    import clingo

    started = time.perf_counter()
    control = clingo.Control(["--warn=none"])
    control.add("base", [], "".join(f"edge({a},{b})." for a, b in edges) + CLINGO_RULES)
    control.ground([("base", [])])
    answer: dict[int, int] = {}
    control.solve(on_model=lambda model: answer.update(
        (symbol.arguments[0].number, symbol.arguments[1].number) for symbol in model.symbols(shown=True)))  # fmt: skip
    return answer, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    n, updates = (200, 4) if quick else (1000, 10)
    print(f"# Python {platform.python_version()}, {os.cpu_count()} cores; chain of {n} edges, {updates} updates")
    edges = [(i, i + 1) for i in range(n)]
    engine = Engine(Program.parse(RULES))
    engine.assert_facts("edge", edges)
    engine.evaluate()
    extra = (n, n + 1)
    ours: list[float] = []
    scratch: list[float] = []
    theirs: list[float] = []
    for update in range(updates):
        adding = update % 2 == 0
        current = [*edges, extra] if adding else edges
        started = time.perf_counter()
        (engine.assert_facts if adding else engine.retract_facts)("edge", [extra])
        stats = engine.evaluate()
        answer = dict(engine.facts("reach_count", sort=False))
        ours.append(time.perf_counter() - started)
        assert stats.mode == "incremental"
        expected, seconds = counts_from_scratch(current)
        scratch.append(seconds)
        peer, seconds = counts_by_clingo(current)
        theirs.append(seconds)
        end = n + 1 if adding else n
        closed_form = {i: end - i for i in range(end)}
        assert answer == expected == peer == closed_form, f"update {update}: the answers differ"
    print("# every update's counts checked: ours = from scratch = clingo = the closed form")
    print("| what | best ms | median ms |\n|---|---|---|")
    for name, times in (("groundstate, incremental (assert or retract, evaluate, read the counts)", ours),
                        ("groundstate, from scratch", scratch), ("clingo, ground and solve", theirs)):  # fmt: skip
        print(f"| {name} | {min(times) * 1000:.1f} | {statistics.median(times) * 1000:.1f} |")
    print(f"\nincremental vs from scratch: {statistics.median(scratch) / statistics.median(ours):.0f}x (median); "
          f"vs clingo: {statistics.median(theirs) / statistics.median(ours):.0f}x")  # fmt: skip


if __name__ == "__main__":
    main()
