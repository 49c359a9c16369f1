"""Cost and wall-time budgets: a price table turns each attempt's tokens into its cost (in the event log, the run's
totals and the guards' facts); passing ``max_cost`` or ``max_wall_seconds`` pauses the run with the reason."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import Script, envelope
from .test_configuration import FLOW, TWO, settings, with_usage

PRICES = '[prices."openai-chat:m@{url}"]\ninput_per_million = 2.5\noutput_per_million = 10\n'


def test_a_price_table_costs_each_attempt_and_a_cost_budget_pauses(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [with_usage(envelope("Draft. [STATUS: SUCCESS]"), 200, 100)],
                      "writer_b": [with_usage(envelope("Final. [STATUS: SUCCESS]"), 200, 100)]}  # fmt: skip
    text = f'[models]\ndefault = "openai-chat:m@{url}"\n[budgets]\nmax_cost = 0.002\n' + PRICES.format(url=url)
    runtime = settings(tmp_path, text)
    run_id = runtime.create(TWO, "b.yaml")
    state = asyncio.run(runtime.drive(run_id))
    first = next(e for e in runtime.store.events(run_id) if e.type == "AgentCompleted")
    assert first.payload["usage"]["cost"] == 0.0015  # 200 x 2.5 + 100 x 10 per million
    assert state.nodes["writer_a"].status == "succeeded" and state.pause is not None
    assert state.pause.reason == "The run's cost budget is spent: 0.003 of 0.002."
    assert state.usage["cost"] == 0.003
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    shown = subprocess.run([sys.executable, "-m", "groundstate", "runs", "show", run_id, "--db",
                            f"sqlite:///{tmp_path / 'c.db'}"], capture_output=True, text=True, env=env,
                           timeout=60)  # fmt: skip
    assert "cost 0.003" in shown.stdout, shown.stdout + shown.stderr


def test_without_a_price_nothing_is_costed(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [with_usage(envelope("Draft. [STATUS: SUCCESS]"), 200, 100)],
                      "writer_b": [with_usage(envelope("Final. [STATUS: SUCCESS]"), 200, 100)]}  # fmt: skip
    other = PRICES.format(url="http://elsewhere/v1")  # a price for another model only
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n[budgets]\nmax_cost = 0.002\n' + other)
    state = asyncio.run(runtime.drive(runtime.create(TWO, "b.yaml")))
    assert state.status == "completed" and state.usage["cost"] == 0


def test_a_wall_time_budget_pauses_the_run(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Draft. [STATUS: SUCCESS]")]}
    script.delays = {"writer_a": 1.2}
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n[budgets]\nmax_wall_seconds = 1\n')
    state = asyncio.run(runtime.drive(runtime.create(FLOW, "t.yaml")))
    assert state.pause is not None
    assert re.fullmatch(r"The run's wall-time budget is spent: running for [2-9] s of 1 s\.", state.pause.reason)
    assert state.running_since is None and state.running_seconds >= 1.2  # paused: the clock stopped


def test_guards_see_each_attempts_tokens_and_latency(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [with_usage(envelope("Draft. [STATUS: SUCCESS]"), 200, 100)],
                      "writer_b": [with_usage(envelope("Final. [STATUS: SUCCESS]"), 200, 300)]}  # fmt: skip
    (tmp_path / "verbose.mg").write_text(
        'needs_approval(R, A, /quality, "a verbose answer") :- agent_usage(R, A, _, Out, Ms), Out > 150, Ms >= 0.\n'
    )
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n[policy]\nguards = ["verbose.mg"]\n')
    state = asyncio.run(runtime.drive(runtime.create(TWO, "b.yaml")))
    assert state.nodes["writer_a"].status == "succeeded"
    assert state.pause is not None and (state.pause.agent, state.pause.reason) == ("writer_b", "a verbose answer")
