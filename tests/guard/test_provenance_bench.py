"""``bench/provenance/run.py`` runs from a clean clone, and ``--recording`` keeps a result before each decision —
checked by what it prints, never by its times (those belong in docs/benchmarks.md, not in a test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parents[2] / "bench" / "provenance" / "run.py"


def bench(*options: str) -> str:
    done = subprocess.run([sys.executable, str(BENCH), "--decisions", "4", "--rounds", "1", *options],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_recording_keeps_a_result_before_each_decision_and_says_what_that_costs() -> None:
    assert "keeping a result p50" in bench("--recording")
    assert "keeping a result" not in bench()  # without it the session stays as it was built
