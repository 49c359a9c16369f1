"""Every benchmark under ``bench/`` still runs to its end, its own checks included, from the README's install plus
``pip install -e ".[bench]"`` (issue 36: "bench/ reproduces every row"). Each benchmark checks its answers equal
to its peers' or to what it expects (an assertion stops it otherwise), so a run that ends with its last line is
one whose rows can be reproduced. Nothing here is timed: a figure is never judged, only that it is printed.

Found by running them all: ``bench/replay`` had stopped at its own check since marks around a value were matched
by its core (its mails' body was then a copy of the inbox, denied by both policies, and nothing flipped) — and no
test ran it. ``bench/mcp`` (tests/guard/test_bench_mcp.py) and ``bench/agentdojo``
(tests/guard/test_agentdojo_sample.py) have tests of their own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[1] / "bench"

# (script, its quickest arguments, what its last lines say when it ran to its end)
RUNS = [
    ("cli/run.py", ["--quick", "--rounds", "1"], r"groundstate runs --help .*\| [\d.]+× \|"),
    ("decision/run.py", ["--quick"], r"cedarpy \(Cedar, Rust\), parsed policies and entities / decision path"),
    ("gateway/run.py", ["--quick"], r"throughput at 100 streams: \d+% of direct .*CPU per stream"),
    ("journal/run.py", ["--calls", "50", "--rounds", "1"], r"median: [\d.]+ ms -> [\d.]+ ms per journaled call"),
    (
        "logic/run.py",
        ["--quick", "--only", "chain-left", "--repeat", "1", "--timeout", "60"],
        r"CLI end to end .* best [\d.]+ ms",
    ),
    ("logic/aggregate.py", ["--quick"], r"incremental vs from scratch: [\d.]+x"),
    ("logic/parse.py", ["--quick"], r"\| clingo .*\|"),
    ("provenance/run.py", ["--decisions", "50", "--rounds", "1"], r"added p50 over 1 rounds: "),
    ("replay/run.py", ["--decisions", "200"], r"replayed them in .* (\d+) flips \(expected \1\)"),
    ("replay/runs.py", ["--agents", "40"], r"checkpoints replayed in .* would flip"),
    (
        "runtime/run.py",
        ["--quick", "--rounds", "1"],
        r"groundstate / LangGraph\+SqliteSaver at equal durability: "
        r"(.|\n)*resume \(replay 100 nodes",
    ),
    ("tracing/run.py", ["--decisions", "100", "--rounds", "1"], r"\n\s+1\s+[\d.]+\s+[\d.]+\s+[\d.]+"),
    ("wire/run.py", ["--quick"], r"Realistic stream: SIGIL decodes [\d.]+ MB/s"),
    ("scale/run.py", ["--quick"], r"store: one writer appends \d+ events/s to PostgreSQL"),
]


@pytest.mark.parametrize(("script", "arguments", "ended"), RUNS, ids=[script for script, _, _ in RUNS])
def test_the_benchmark_runs_to_its_end_with_its_checks(script: str, arguments: list[str], ended: str,
                                                       tmp_path: Path) -> None:  # fmt: skip
    done = subprocess.run([sys.executable, str(BENCH / script), *arguments], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, f"{script} stopped:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert re.search(ended, done.stdout), f"{script} did not print its last rows:\n{done.stdout[-3000:]}"


def test_every_benchmark_script_is_run_here_or_by_a_test_of_its_own() -> None:
    """A benchmark added under ``bench/`` without a run here fails this test (helpers beside them are named)."""
    helpers = {"logic/engines.py", "logic/workloads.py", "mcp/echo_server.py", "scale/model_server.py",
               "agentdojo/server.py", "processes.py"}  # fmt: skip
    tested_elsewhere = {"mcp/run.py", "agentdojo/run.py"}
    scripts = {str(path.relative_to(BENCH)) for path in BENCH.rglob("*.py")}
    assert scripts - helpers - tested_elsewhere == {script for script, _, _ in RUNS}
