"""Every breaker trip fails the agent first: ``AgentFailed`` with the error and the recovery hint, so a cortex
pattern on AgentFailed sees semantic nulls, protocol violations, drought and held calls too — and the pause card
leads with the breaker that tripped, not with the generic failure pattern."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from groundstate.runtime import AGENT_FAILED, APPROVAL_REQUESTED, TOOL_CALL, Event, EventStore, Runtime, make_backend

from .conftest import Script, envelope

FLOW = """
name: breakers
agents:
  - id: research_a
    instructions: Find it.
    tools: [web_search]
  - id: writer_b
    instructions: Write it.
    tools: [delete_file]
    depends_on: [research_a]
"""
NULL = "[BYPASS: nothing to search] Nothing found. [STATUS: NULL]"
GENERIC = "Execution Exception detected. Review logs and authorize Retry or Skip."


def runtime_for(tmp_path: Path, url: str, patterns: Path | None = None) -> Runtime:
    return Runtime(EventStore(f"sqlite:///{tmp_path / 'b.db'}"), tmp_path / "home",
                   backend=make_backend(f"openai-chat:s@{url}"), patterns_path=patterns)  # fmt: skip


def failed_before_the_pause(runtime: Runtime, run_id: str) -> Event:
    events = runtime.store.events(run_id)
    assert events[-1].type == APPROVAL_REQUESTED and events[-2].type == AGENT_FAILED
    return events[-2]


def test_a_semantic_null_fails_the_agent_with_its_reason_and_hint(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"research_a": [envelope(NULL)]}
    runtime = runtime_for(tmp_path, url)
    run_id = runtime.create(FLOW, "b.yaml", "s")
    state = asyncio.run(runtime.drive(run_id))
    failed = failed_before_the_pause(runtime, run_id)
    assert failed.payload["error"].startswith("Semantic null: agent 'research_a'")
    assert (
        failed.payload["recovery_hint"].startswith("The agent found nothing: give it a better source")
        and failed.payload["category"] == "quality"
    )
    assert state.pause is not None and state.pause.reason.startswith("Semantic null")  # not the generic pattern
    assert GENERIC in state.pause.others  # which is listed beside it


def test_a_pattern_on_agent_failed_sees_every_trip(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    (tmp_path / "stop.json").write_text(json.dumps([{
        "id": "stop_on_null", "name": "Stop on a null", "trigger_event": "AgentFailed",
        "condition": "status_tag(Run, Agent, /null)",
        "action": {"Interrupt": {"reason": "a null ends the run"}}}]))  # fmt: skip
    script.answers = {"research_a": [envelope(NULL)]}
    runtime = runtime_for(tmp_path, url, tmp_path / "stop.json")
    state = asyncio.run(runtime.drive(runtime.create(FLOW, "b.yaml", "s")))
    assert state.status == "aborted" and state.outcome == "a null ends the run"


def test_drought_and_a_held_call_fail_the_agent_too(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    cleaning = envelope("Cleaning.", [{"tool": "delete_file", "argument": "old.txt"}])
    script.answers = {"research_a": [envelope("[BYPASS: known] 12 bn. [STATUS: SUCCESS]")], "writer_b": [cleaning]}
    runtime = runtime_for(tmp_path, url)
    run_id = runtime.create(FLOW, "b.yaml", "s")
    asyncio.run(runtime.drive(run_id))
    failed = failed_before_the_pause(runtime, run_id)
    assert failed.agent == "writer_b" and failed.payload["category"] == "safety"
    assert failed.payload["error"] == "The agent asked to delete a file."
    held = runtime.store.events(run_id)[-1].payload["held_call"]
    assert runtime.store.events(run_id)[held - 1].type == TOOL_CALL
    script.answers = {"research_a": [envelope(NULL)], "writer_b": [envelope("x")]}
    drought = runtime
    run_id = drought.create(FLOW, "b.yaml", "s")
    asyncio.run(drought.drive(run_id))
    drought.decide(run_id, "skip")  # the null research is skipped: the writer would start without data
    asyncio.run(drought.drive(run_id))
    failed = failed_before_the_pause(drought, run_id)
    assert failed.agent == "writer_b" and failed.payload["error"].startswith("Context drought")
