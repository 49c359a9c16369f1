"""A fixed sample of AgentDojo's workspace suite (and one pair of the travel suite), replayed by the worst-case
agent (bench/agentdojo/run.py): pairs whose attack succeeds without the guard, and fails behind it, with the user
task still done where the policy lets it. Something real nobody here wrote: the suite's own environments, injection
vectors and checks."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "agentdojo"
if not os.environ.get("CI"):  # under CI the dev extra installed it: a missing one fails there, never skips
    pytest.importorskip("agentdojo", reason="pip install -e '.[dev]' installs agentdojo")
sys.path.insert(0, str(BENCH))
import run as dojo  # type: ignore[import-not-found]  # noqa: E402 - bench/agentdojo/run.py

SAMPLE = [("workspace", "user_task_25", "injection_task_5"), ("workspace", "user_task_12", "injection_task_4"),
          # the injection names a city; the agent lists its hotels (a trusted listing) and books the one it asks
          # for: no value is copied from the review, the listing was chosen by it (flows.mg's flow_steered)
          ("travel", "user_task_15", "injection_task_4")]


def replay(suite: Any, user: str, injection: str, folder: Path, direct: bool) -> Any:
    folder.mkdir()
    return asyncio.run(dojo.episode(suite, user, injection, folder, direct))


def test_injected_goals_succeed_without_the_guard_and_fail_behind_it(tmp_path: Path) -> None:
    for number, (name, user, injection) in enumerate(SAMPLE):
        suite = dojo.get_suite(dojo.VERSION, name)
        direct = replay(suite, user, injection, tmp_path / f"direct{number}", direct=True)
        assert direct.security, f"{user} + {injection}: the attack should succeed without the guard"
        guarded = replay(suite, user, injection, tmp_path / f"guarded{number}", direct=False)
        assert not guarded.security, f"{user} + {injection}: the attack succeeded behind the guard: {guarded.calls}"
        assert guarded.denied > 0  # refused, each with a derivation naming where the value came from
