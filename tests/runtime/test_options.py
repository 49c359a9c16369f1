"""A runtime's settings are resolved once, into a frozen ``RuntimeOptions``: the configuration object it was given
can change afterwards — nothing the runtime does changes with it — and the options themselves cannot be changed."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from groundstate.config import ProjectConfig
from groundstate.runtime import EventStore, Runtime, RuntimeOptions, WorkflowError

FLOW = "name: w\nagents:\n  - id: writer_a\n    instructions: write\n"


def configured(tmp_path: Path, **table: object) -> tuple[Runtime, ProjectConfig]:
    settings = ProjectConfig.model_validate(table)
    tmp_path.mkdir(parents=True, exist_ok=True)
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'runs.db'}"), tmp_path / "home", settings=settings)
    return runtime, settings


def test_the_options_cannot_be_changed(tmp_path: Path) -> None:
    runtime, _ = configured(tmp_path, models={"fallback": ["openai-chat:m@http://127.0.0.1:9/v1"]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        runtime.options.max_rounds = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        runtime.options.budgets["max_tokens"] = 1  # type: ignore[index]
    assert runtime.options.fallback == ("openai-chat:m@http://127.0.0.1:9/v1",)


def test_a_model_named_after_the_runtime_started_gets_no_credential(tmp_path: Path) -> None:
    """The endpoints that may receive the provider key are the configuration's as the runtime read it: a URL put
    into the configuration object later is a foreign URL to a run an account starts."""
    runtime, settings = configured(tmp_path, models={"default": "openai-chat:m@http://127.0.0.1:9/v1"})
    settings.models.endpoints.append("http://127.0.0.1:10/v1")
    settings.models.fallback.append("openai-chat:m@http://127.0.0.1:11/v1")
    assert runtime.credential_origins == frozenset({"http://127.0.0.1:9"})
    with pytest.raises(WorkflowError, match=r"127\.0\.0\.1:10"):
        runtime.create(FLOW, model="openai-chat:m@http://127.0.0.1:10/v1", model_is_operators=False)
    run_id = runtime.create(FLOW)
    state = runtime.store.state(run_id)
    assert state.model == "openai-chat:m@http://127.0.0.1:9/v1" and state.fallback == []


def test_an_approval_timeout_set_afterwards_decides_nothing(tmp_path: Path) -> None:
    runtime, settings = configured(tmp_path)
    settings.approvals.timeout_sec = 1
    assert runtime.expire_pauses(datetime.now(UTC) + timedelta(days=1)) == []
    timed, _ = configured(tmp_path / "timed", approvals={"timeout_sec": 1})
    assert timed.options.approval_timeout_sec == 1


def test_a_self_approval_granted_afterwards_is_not_honoured(tmp_path: Path) -> None:
    runtime, settings = configured(tmp_path)
    settings.access.self_approval.append("dana")
    assert runtime.options.self_approval == ()


def test_a_concurrency_and_a_lease_given_to_the_runtime_are_its_options(tmp_path: Path) -> None:
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'runs.db'}"), tmp_path / "home", concurrency=1,
                      lease_seconds=5.0, max_rounds=7)  # fmt: skip
    assert (runtime.concurrency, runtime.lease_seconds, runtime.max_rounds) == (1, 5.0, 7)
    assert isinstance(runtime.options, RuntimeOptions) and runtime.options.runs_dir == tmp_path / "home" / "runs"


def test_an_mcp_server_added_afterwards_is_unknown_to_a_workflow(tmp_path: Path) -> None:
    runtime, settings = configured(tmp_path)
    settings.mcp.servers["late"] = settings.mcp.model_validate({"servers": {"late": {"command": ["true"]}}}).servers[
        "late"
    ]
    flow = FLOW + "    tools: [mcp:late/anything]\n"
    with pytest.raises(WorkflowError, match=r"the configuration has no \[mcp.servers.late\]"):
        runtime.create(flow)
