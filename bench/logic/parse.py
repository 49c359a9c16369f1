"""Loading the policy workload's program (2.2 MB, ~98,000 ground facts and its rules): groundstate's parser with
its ground-fact fast path, the same parser without it (every line through the tokenizer), and clingo's (`add`), in
one run.

    python bench/logic/parse.py            # 7 rounds
    python bench/logic/parse.py --quick    # 2 rounds

The answers are checked: the fast path's parse is the full parser's, position for position, and clingo reads as
many statements as groundstate does.
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

from groundstate.logic.parser import Parser, parse_unit


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


def timed(run: Callable[[], object], rounds: int, check: Callable[[object], object]) -> tuple[list[float], object]:
    """The times of ``rounds`` runs and ``check`` of the last answer; each answer is dropped and the garbage collected
    before the next run, so no run pays for the one before it."""
    times, checked = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        answer = run()
        times.append(time.perf_counter() - start)
        checked = check(answer)
        del answer
        gc.collect()
    return times, checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    rounds = 2 if parser.parse_args().quick else 7
    workload = policy()
    ours, theirs = mangle_text(workload), clingo_text(workload, workload.facts)
    rows = {
        "groundstate (fast path for ground facts)": lambda: parse_unit(ours, "policy.mg"),
        "groundstate (every line through the tokenizer)": lambda: Parser(ours, "policy.mg").parse_unit(),
        "clingo 5 (Control.add)": lambda: clingo_load(theirs),
    }
    parsed: Callable[[object], object] = lambda unit: (repr(unit), len(unit.clauses) + len(unit.decls))  # type: ignore[attr-defined]  # noqa: E731
    checks = {name: parsed if name.startswith("groundstate") else (lambda _: None) for name in rows}
    results = {name: timed(run, rounds, checks[name]) for name, run in rows.items()}
    fast, slow = results["groundstate (fast path for ground facts)"][1], results[
        "groundstate (every line through the tokenizer)"][1]  # fmt: skip
    assert fast == slow, "the fast path parsed differently"
    statements = fast[1]  # type: ignore[index]
    assert clingo_statements(theirs) == statements, "clingo read a different number of statements"
    print(f"python {platform.python_version()}, {os.cpu_count()} cores; {len(ours):,} characters, {statements:,} "
          f"statements; {rounds} rounds\n")  # fmt: skip
    print("| parser | best s | median s |")
    print("|---|---:|---:|")
    for name, (times, _) in results.items():
        print(f"| {name} | {min(times):.3f} | {statistics.median(times):.3f} |")


if __name__ == "__main__":
    main()
