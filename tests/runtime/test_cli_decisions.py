"""Decisions on the command line do what they say: --decide retry with unchanged instructions stops, with a message,
once the agent pauses again for the same reason; --instructions with anything but a retry is an error, not ignored;
a run that completes with every agent skipped says so and exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import Script, envelope

FLOW = "name: decide\nagents:\n  - id: writer_a\n    instructions: Write it.\n"


def groundstate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "240"}
    env.pop("GROUNDSTATE_CONFIG", None)
    env.pop("GROUNDSTATE_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "groundstate", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip


def test_a_retry_that_cannot_help_stops_with_the_reason(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Nothing found. [STATUS: NULL]")]}  # the same answer, every attempt
    (tmp_path / "flow.yaml").write_text(FLOW)
    done = groundstate(tmp_path, "run", "flow.yaml", "--model", f"openai-chat:m@{url}", "--decide", "retry",
                       "--max-decisions", "5")  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "stopped: agent 'writer_a' paused again for the same reason after a retry with unchanged instructions" \
        in done.stdout.replace("\n", " ")  # fmt: skip
    assert len(script.requests) == 2  # one retry, not five


def test_instructions_without_a_retry_are_refused(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    (tmp_path / "flow.yaml").write_text(FLOW)
    (tmp_path / "new.txt").write_text("Do better.")
    for decision in ("skip", "abort"):
        done = groundstate(tmp_path, "run", "flow.yaml", "--model", f"openai-chat:m@{url}", "--decide", decision,
                           "--instructions", "new.txt")  # fmt: skip
        assert done.returncode == 2 and f"--instructions are for a retried agent (--decide retry), not --decide " \
            f"{decision}" in done.stdout  # fmt: skip
    refused = groundstate(tmp_path, "runs", "decide", "run-x", "skip", "--instructions", "new.txt")
    assert refused.returncode == 2 and "not --decide skip" in refused.stdout
    assert script.requests == []  # nothing was created or run


def test_a_run_with_every_agent_skipped_is_not_a_success(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Nothing found. [STATUS: NULL]")]}
    (tmp_path / "flow.yaml").write_text(FLOW)
    done = groundstate(tmp_path, "run", "flow.yaml", "--model", f"openai-chat:m@{url}", "--decide", "skip")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "completed — but no agent produced output (every one was skipped)" in done.stdout


def test_runs_show_prints_each_agents_output_and_json(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("The brief: storage grows 18% a year. [STATUS: SUCCESS]")]}
    (tmp_path / "flow.yaml").write_text(FLOW)
    done = groundstate(tmp_path, "run", "flow.yaml", "--model", f"openai-chat:m@{url}")
    run_id = done.stdout.split()[1]
    shown = groundstate(tmp_path, "runs", "show", run_id)
    assert "writer_a (succeeded, attempt 1):" in shown.stdout and "storage grows 18% a year" in shown.stdout
    summary = json.loads(groundstate(tmp_path, "runs", "show", run_id, "--json").stdout)
    assert summary["status"] == "completed" and summary["pauses"] == []
    assert summary["agents"]["writer_a"]["output"].startswith("The brief: storage grows 18% a year.")
