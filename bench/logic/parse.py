"""Loading the policy workload's program (2.2 MB, ~98,000 ground facts and its rules): groundstate's load for an
engine (plain facts kept as rows: what `Program.parse` and `Program.load` do), its parse into syntax trees (the
fast path's rows turned into clauses), the same parser without the fast path (every line through the tokenizer),
and clingo's (`add`), alternating in one run.

    python bench/logic/parse.py            # 7 rounds
    python bench/logic/parse.py --quick    # 2 rounds

The answers are checked: the fast path's parse is the full parser's, position for position, the rows loaded are
the facts it parsed, and clingo reads as many statements as groundstate does.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from engines import clingo_text, mangle_text
from workloads import policy

from groundstate.logic.parser import Parser, load_unit, parse_unit


def clingo_load(text: str) -> object:
    """What clingo's load is in bench/logic/run.py: a control and the program added (parsed)."""
    import clingo

    control = clingo.Control(["--warn=none"])
    control.add("base", [], text)
    return control


def clingo_statements(text: str) -> int:
    """How many statements clingo reads in the text (the answer checked against ours)."""
    from clingo.ast import parse_string

    statements: list[object] = []
    parse_string(text, statements.append)
    return len(statements) - 1  # parse_string also reports the implicit "#program base."


def alternating(rows: dict[str, Callable[[], object]], rounds: int) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Each row's times over ``rounds`` rounds, the rows taking turns within a round (so a slow minute of the machine
    is shared), and each row's answer from the last round; every other answer is dropped and the garbage collected
    before the next run, so no run pays for another's (not even a larger heap to allocate in)."""
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(rounds):
        for name, run in rows.items():
            gc.collect()
            start = time.perf_counter()
            answer = run()
            times[name].append(time.perf_counter() - start)
            del answer
    gc.collect()
    return times, {name: run() for name, run in rows.items()}


LOADED = "groundstate, loaded for an engine (fact lines as rows)"
TREES = "groundstate, syntax trees (the fast path's rows made clauses)"
FULL = "groundstate, every line through the tokenizer"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    rounds = 2 if parser.parse_args().quick else 7
    workload = policy()
    ours, theirs = mangle_text(workload), clingo_text(workload, workload.facts)
    rows = {
        LOADED: lambda: load_unit(ours, "policy.mg"),
        TREES: lambda: parse_unit(ours, "policy.mg"),
        FULL: lambda: Parser(ours, "policy.mg").parse_unit(),
        "clingo 5 (Control.add)": lambda: clingo_load(theirs),
    }
    times, answers = alternating(rows, rounds)
    loaded, trees, full = answers[LOADED], answers[TREES], answers[FULL]
    assert repr(trees) == repr(full), "the fast path parsed differently"
    facts = [clause for clause in full.clauses if clause.is_fact]  # type: ignore[attr-defined]
    assert len(loaded.ground) > 0.9 * len(facts), "the fast path took too few lines"  # type: ignore[attr-defined]
    taken = {row.pos.line for row in loaded.ground}  # type: ignore[attr-defined]
    assert [(row.predicate, row.values) for row in loaded.ground] == [  # type: ignore[attr-defined]
        (fact.head.predicate, tuple(arg.value for arg in fact.head.args)) for fact in facts if fact.pos.line in taken
    ], "the rows are not the facts the full parser read"
    statements = len(full.clauses) + len(full.decls)  # type: ignore[attr-defined]
    assert clingo_statements(theirs) == statements, "clingo read a different number of statements"
    print(f"python {platform.python_version()}, {os.cpu_count()} cores; {len(ours):,} characters, {statements:,} "
          f"statements; {rounds} rounds\n")  # fmt: skip
    print("| parser | best s | median s |")
    print("|---|---:|---:|")
    for name, row_times in times.items():
        print(f"| {name} | {min(row_times):.3f} | {statistics.median(row_times):.3f} |")


if __name__ == "__main__":
    main()
