"""``[approvals]``: a pause nobody decides within ``timeout_sec`` is decided by the rules of approvals.mg — a
quality pause gets ``default_decision``, a safety pause aborts the run whatever the default — and the decision is
recorded as ``policy:approval_timeout``. ``groundstate serve`` applies it on its own (tests/console)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from groundstate.config import ProjectConfig
from groundstate.runtime import EventStore, Runtime, make_backend

from .conftest import Script, envelope
from .test_open_pauses import DONE, NULL, TWO_WRITERS

DANGER = "name: d\nagents:\n  - id: coder_x\n    instructions: Clean up.\n    tools: [execute_python, delete_file]\n"


def runtime_for(tmp_path: Path, url: str, approvals: dict[str, Any]) -> Runtime:
    settings = ProjectConfig.model_validate({"approvals": approvals})
    return Runtime(EventStore(f"sqlite:///{tmp_path / 't.db'}"), tmp_path, settings=settings,
                   backend=make_backend(f"openai-chat:m@{url}"))  # fmt: skip


def later(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def test_quality_pauses_get_the_default_decision_once_they_waited_too_long(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    model[1].answers = {"writer_a": [NULL, DONE], "writer_b": [NULL, DONE]}
    runtime = runtime_for(tmp_path, model[0], {"timeout_sec": 60, "default_decision": "skip"})
    run_id = runtime.create(TWO_WRITERS)
    asyncio.run(runtime.drive(run_id))
    assert runtime.expire_pauses(later(30)) == []  # not yet
    decided = runtime.expire_pauses(later(61))
    assert sorted(d for _, _, d in decided) == ["skip", "skip"]
    state = runtime.store.state(run_id)
    assert state.status == "running" and {n.status for n in state.nodes.values()} == {"skipped"}
    decisions = [e for e in runtime.store.events(run_id) if e.type == "ApprovalDecided"]
    assert {e.actor for e in decisions} == {"policy:approval_timeout"}
    assert runtime.expire_pauses(later(120)) == []  # nothing is left to decide


def test_a_safety_pause_aborts_the_run_whatever_the_default(tmp_path: Path, model: tuple[str, Script]) -> None:
    model[1].answers = {"coder_x": [envelope("x", [{"tool": "delete_file", "argument": "keep.txt"}])]}
    runtime = runtime_for(tmp_path, model[0], {"timeout_sec": 5, "default_decision": "skip"})
    run_id = runtime.create(DANGER)
    assert asyncio.run(runtime.drive(run_id)).pause.category == "safety"  # type: ignore[union-attr]
    assert [d for _, _, d in runtime.expire_pauses(later(6))] == ["abort"]
    state = runtime.store.state(run_id)
    assert state.status == "aborted" and state.outcome == "aborted by policy:approval_timeout"


def test_without_a_timeout_pauses_wait(tmp_path: Path, model: tuple[str, Script]) -> None:
    model[1].answers = {"writer_a": [NULL], "writer_b": [NULL]}
    runtime = runtime_for(tmp_path, model[0], {})
    run_id = runtime.create(TWO_WRITERS)
    asyncio.run(runtime.drive(run_id))
    assert runtime.expire_pauses(later(10**7)) == [] and len(runtime.store.state(run_id).pauses) == 2
