"""The seed's recovery flow end to end on the embedded local model (SmolLM2 through llama.cpp), via the CLI:
a research agent that does not search pauses the run; the operator edits its instructions and retries; the run
completes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from groundstate.runtime import recorded_answers
from groundstate.wire import Content

EXAMPLE = Path(__file__).parents[2] / "examples" / "market-brief.yaml"


def groundstate(home: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GROUNDSTATE_HOME": str(home), "COLUMNS": "160"}
    env.pop("GROUNDSTATE_TOKEN", None)
    if token is not None:
        env["GROUNDSTATE_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "groundstate", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=600)  # fmt: skip


def test_operator_edits_instructions_and_the_run_completes(tmp_path: Path) -> None:
    first = groundstate(tmp_path, "run", str(EXAMPLE))
    assert first.returncode == 3, first.stdout + first.stderr  # paused
    assert "QUALITY PAUSE" in first.stdout and "Protocol violation: agent 'research_market'" in first.stdout
    run_id = first.stdout.split()[1]

    refused = groundstate(tmp_path, "runs", "resume", "run-missing")
    assert refused.returncode == 2 and "there is no run run-missing" in refused.stdout

    instructions = tmp_path / "instructions.txt"
    instructions.write_text("Use web_search to find the 2025 market size for home battery storage.")
    added = groundstate(tmp_path, "operators", "add", "bob", "--role", "operator")  # as the first admin
    bob = added.stdout.split()[-1]
    decided = groundstate(tmp_path, "runs", "decide", run_id, "retry", "--instructions", str(instructions), token=bob)
    assert decided.returncode == 0, decided.stdout

    resumed = groundstate(tmp_path, "runs", "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"run {run_id}: completed" in resumed.stdout

    again = groundstate(tmp_path, "runs", "decide", run_id, "retry")
    assert again.returncode == 1 and "not awaiting approval" in again.stdout

    log = [json.loads(line) for line in groundstate(tmp_path, "runs", "show", run_id, "--events").stdout.splitlines()]
    decided_event = next(e for e in log if e["type"] == "ApprovalDecided")
    assert decided_event["actor"] == "operator:bob"  # the account whose token decided, not a typed name
    assert decided_event["payload"]["instructions"].startswith("Use web_search")
    research = [e for e in log if e["agent"] == "research_market"]
    assert [e["type"] for e in research if e["type"] in ("AgentStarted", "ToolCall", "AgentCompleted")][:3] == [
        "AgentStarted",
        "AgentStarted",
        "ToolCall",
    ]
    results = [e for e in research if e["type"] == "ToolResult"]
    assert (
        results
        and results[0]["payload"]["status"] == "/success"
        and "home-batteries.md" in results[0]["payload"]["output"]
    )
    second = [chunks for entry, chunks in recorded_answers(tmp_path / "runs" / run_id / "recordings")
              if entry["agent"] == "research_market" and entry["attempt"] == 2]  # fmt: skip
    assert second and all(any(isinstance(c, Content) and c.tokens for c in chunks) for chunks in second)
    listed = groundstate(tmp_path, "runs", "list")
    assert run_id in listed.stdout and "completed" in listed.stdout
