"""Which model answers: the agent's own ``model``, else the workflow's, else the run's — each a real loopback
provider — and a model spec that names nothing is refused before a run exists."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from groundstate.runtime import AGENT_STARTED, EventStore, ModelSpecError, Runtime

from .conftest import Script, envelope


def flow(agent_model: str | None = None, workflow_model: str | None = None) -> str:
    lines = ["name: models"] + ([f"model: {workflow_model}"] if workflow_model else []) + [
        "agents:",
        "  - id: writer_a",
        "    instructions: Draft it.",
        "  - id: writer_b",
        "    instructions: Polish it.",
        "    depends_on: [writer_a]",
    ] + ([f"    model: {agent_model}"] if agent_model else [])  # fmt: skip
    return "\n".join(lines) + "\n"


def started_backends(runtime: Runtime, run_id: str) -> dict[str, str]:
    return {e.agent or "": e.payload["backend"] for e in runtime.store.events(run_id) if e.type == AGENT_STARTED}


def test_an_agents_model_answers_that_agent(
    tmp_path: Path, model: tuple[str, Script], other: tuple[str, list[dict[str, object]]]
) -> None:
    url, script = model
    other_url, seen = other
    script.answers = {"writer_a": [envelope("Draft. [STATUS: SUCCESS]")]}
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'm.db'}"), tmp_path)
    run_id = runtime.create(flow(agent_model=f"openai-chat:other@{other_url}"), "m.yaml", f"openai-chat:main@{url}")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "completed"
    assert [agent for agent, _ in script.requests] == ["writer_a"]  # the run's model answered writer_a only
    assert len(seen) == 1 and seen[0]["model"] == "other"  # writer_b's own model answered writer_b
    assert started_backends(runtime, run_id) == {"writer_a": f"openai-chat:main@{url}",
                                                 "writer_b": f"openai-chat:other@{other_url}"}  # fmt: skip


def test_the_workflows_model_is_the_default_of_its_agents(
    tmp_path: Path, model: tuple[str, Script], other: tuple[str, list[dict[str, object]]]
) -> None:
    url, script = model
    other_url, seen = other
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'w.db'}"), tmp_path)
    run_id = runtime.create(flow(workflow_model=f"openai-chat:other@{other_url}"), "w.yaml", f"openai-chat:main@{url}")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    assert script.requests == [] and len(seen) == 2


@pytest.mark.parametrize("where", ["run", "agent", "workflow"])
def test_a_model_spec_that_names_nothing_is_refused_before_the_run_exists(tmp_path: Path, where: str) -> None:
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'b.db'}"), tmp_path)
    text = flow(
        agent_model="gpt-9" if where == "agent" else None, workflow_model="gpt-9" if where == "workflow" else None
    )
    with pytest.raises(ModelSpecError, match="model 'gpt-9': use 'local'"):
        runtime.create(text, "b.yaml", "gpt-9" if where == "run" else "local")
    assert runtime.store.runs() == []


def test_the_cli_names_a_bad_model_and_creates_no_run(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(flow(), encoding="utf-8")
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "groundstate", "run", str(path), "--model", "gpt-9"],
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr + done.stdout
    assert "model 'gpt-9': use 'local'" in done.stdout + done.stderr
    listed = subprocess.run([sys.executable, "-m", "groundstate", "runs", "list"], capture_output=True, text=True,
                            env=env, timeout=120)  # fmt: skip
    assert "run-" not in listed.stdout
