"""Every guard and cortex pattern, end to end through the runtime, with a scripted model on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from groundstate.kernel import KernelConfig, ShardProfile
from groundstate.runtime import (
    AGENT_FAILED,
    APPROVAL_DECIDED,
    TOOL_RESULT,
    EventStore,
    RunState,
    Runtime,
    make_backend,
    recorded_answers,
)
from groundstate.wire import Content

from .conftest import Script, envelope

FLOW = """
name: guarded
agents:
  - id: research_a
    instructions: Find the figure.
    tools: [web_search]
  - id: writer_b
    instructions: Write it up.
    depends_on: [research_a]
"""
SEARCH = [{"tool": "web_search", "argument": "home battery market"}]


def run(runtime: Runtime, flow: str = FLOW) -> tuple[str, RunState]:
    run_id = runtime.create(flow, "flow.yaml", "scripted")
    return run_id, asyncio.run(runtime.drive(run_id))


def types(runtime: Runtime, run_id: str) -> list[str]:
    return [e.type for e in runtime.store.events(run_id)]


def test_a_clean_run_completes(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.answers = {"research_a": [envelope("Searching.", SEARCH), envelope("12.4 bn. [STATUS: SUCCESS]")],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    run_id, state = run(runtime)
    assert state.status == "completed", state.pause
    assert state.nodes["research_a"].output == "12.4 bn. [STATUS: SUCCESS]"
    [call] = state.nodes["research_a"].tools
    assert call["tool"] == "web_search" and call["status"] == "/success" and "home-batteries.md" in call["output"]
    writer_prompt = next(b for a, b in script.requests if a == "writer_b")["messages"][1]["content"]
    assert "Output of research_a:\n12.4 bn." in writer_prompt
    folder = runtime.home / "runs" / run_id / "recordings"
    assert sorted(p.name for p in folder.iterdir()) == ["index.jsonl", "run.sigil"]  # one recording per run
    recorded = [
        (e["agent"], e["attempt"], e["round"], json.loads(_text(chunks))) for e, chunks in recorded_answers(folder)
    ]
    assert sorted(recorded) == [("research_a", 1, 1, envelope("Searching.", SEARCH)),
                                ("research_a", 1, 2, envelope("12.4 bn. [STATUS: SUCCESS]")),
                                ("writer_b", 1, 1, envelope("Brief. [STATUS: SUCCESS]"))]  # fmt: skip


def _text(chunks: list[Any]) -> str:
    """The text of a recorded answer (the scripted provider's tokens are the text's bytes)."""
    return b"".join(bytes(c.tokens) for c in chunks if isinstance(c, Content)).decode("utf-8")


def test_protocol_violation_is_judged_from_executed_tools_not_text(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.answers = {"research_a": [envelope("I used web_search: Tool 'web_search' Result: 12. [STATUS: SUCCESS]")]}
    _, state = run(runtime)
    assert state.status == "awaiting_approval" and state.pause is not None
    assert (state.pause.agent, state.pause.category) == ("research_a", "quality")
    assert state.pause.reason.startswith("Protocol violation: agent 'research_a' did not execute /web_search")
    assert state.nodes["writer_b"].status == "pending"  # the DAG did not proceed on bad data


def test_bypass_excuses_the_mandatory_tool(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.answers = {"research_a": [envelope("[BYPASS: the figure is in the task] 12. [STATUS: SUCCESS]")],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    assert run(runtime)[1].status == "completed"


def test_semantic_null_pauses(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.answers = {"research_a": [envelope("Searching.", SEARCH), envelope("Nothing found. [STATUS: NULL]")]}
    _, state = run(runtime)
    assert state.pause is not None and state.pause.reason.startswith("Semantic null: agent 'research_a'")


def test_skip_gives_dependants_a_drought(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.answers = {"research_a": [envelope("Nothing. [STATUS: NULL]")], "writer_b": [envelope("x")]}
    run_id, _ = run(runtime)
    runtime.decide(run_id, "skip")
    state = asyncio.run(runtime.drive(run_id))
    assert state.nodes["research_a"].status == "skipped"
    assert state.pause is not None and state.pause.agent == "writer_b"
    assert state.pause.reason.startswith("Context drought: agent 'writer_b' would start")
    assert not any(a == "writer_b" for a, _ in script.requests)  # pre-flight: it never ran
    runtime.decide(run_id, "abort", actor="alice")
    state = runtime.store.state(run_id)
    assert state.status == "aborted"
    decided = [e for e in runtime.store.events(run_id) if e.type == APPROVAL_DECIDED]
    assert [(e.payload["decision"], e.actor) for e in decided] == [("skip", "operator"), ("abort", "alice")]


def test_hard_errors_pause_through_the_failure_pattern(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    body = json.dumps({"error": {"message": "Incorrect API key", "type": "invalid_request_error",
                                 "code": "invalid_api_key"}}).encode()  # fmt: skip
    script.answers = {"research_a": [(401, body)]}
    run_id, state = run(runtime)
    assert state.status == "awaiting_approval" and AGENT_FAILED in types(runtime, run_id)
    reasons = [r["reason"] for r in runtime.store.events(run_id)[-1].payload["reasons"]]
    assert "Execution Exception detected. Review logs and authorize Retry or Skip." in reasons  # the cortex pattern
    assert any(r.startswith("Execution failure in agent 'research_a': the model failed (auth)") for r in reasons)


def test_a_rejected_packet_is_a_hard_error(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.answers = {"research_a": ['{"surface_response": "I did it", "control_packet": {}}']}
    _, state = run(runtime)
    assert state.nodes["research_a"].status == "paused"
    failed = state.nodes["research_a"].error or ""
    assert "rejected by the packet gate: surface_response came before control_packet" in failed


DANGER = """
name: dangerous
agents:
  - id: coder_x
    instructions: Clean up.
    tools: [execute_python, delete_file, write_file]
"""


def test_dangerous_tool_calls_pause_before_they_run(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    cases = [
        ([{"tool": "delete_file", "argument": "keep.txt"}], "The agent asked to delete a file."),
        ([{"tool": "execute_python", "argument": "import os; os.system('sudo rm -rf /')"}],
         "The agent's code tries to gain privileges"),
        ([{"tool": "write_file", "argument": "../outside.txt", "content": "x"}],
         "The agent tried to write outside the run's workspace."),
    ]  # fmt: skip
    for tools, reason in cases:
        script.requests.clear()
        script.answers = {"coder_x": [envelope("Working.", tools)]}
        run_id, state = run(runtime, DANGER)
        assert state.pause is not None and state.pause.category == "safety" and state.pause.reason.startswith(reason)
        assert TOOL_RESULT not in types(runtime, run_id)  # nothing ran
        workspace = runtime.home / "runs" / run_id / "workspace"
        assert not (workspace.parent / "outside.txt").exists()


def test_tools_the_agent_lacks_are_denied_by_the_constitution(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.answers = {"research_a": [envelope("x", [*SEARCH, {"tool": "execute_python", "argument": "print(1)"}]),
                                     envelope("Done. [STATUS: SUCCESS]")],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    _, state = run(runtime)
    denied = [t for t in state.nodes["research_a"].tools if t["tool"] == "execute_python"]
    assert denied and denied[0]["decision"] == "/deny"
    assert denied[0]["reason"] == "the workflow does not give this agent that tool"


def test_edited_instructions_reach_the_model_on_retry(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.answers = {"research_a": [envelope("From memory. [STATUS: SUCCESS]"), envelope("x", SEARCH),
                                     envelope("12.4 bn. [STATUS: SUCCESS]")],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    run_id, state = run(runtime)
    assert state.status == "awaiting_approval"
    runtime.decide(run_id, "retry", "Search the corpus for the home battery market.")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "completed" and state.nodes["research_a"].attempts == 2
    retried = [b for a, b in script.requests if a == "research_a"][1]["messages"][1]["content"]
    assert retried == "Task: Search the corpus for the home battery market."


def test_a_prompt_over_the_context_budget_pauses(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"research_a": [envelope("x")]}
    config = KernelConfig(shard_profiles={"main": ShardProfile(max_context_tokens=50)})
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'b.db'}"), tmp_path,
                      backend=make_backend(f"openai-chat:s@{url}"), config=config)  # fmt: skip
    _, state = run(runtime)
    assert state.pause is not None
    failure = next(r for r in [state.pause.reason, *state.pause.others] if r.startswith("Execution failure"))
    assert "the prompt is too long" in failure and "exceed the shard's context budget of 50 tokens" in failure
    assert script.requests == []  # nothing was sent to the model


ROLES = """
name: roles
roles:
  - prefix: auditor_
    mandatory_tools: [read_file]
  - prefix: research_
    mandatory_tools: [list_files]
agents:
  - id: auditor_a
    instructions: Audit the notes.
    tools: [read_file]
  - id: research_b
    instructions: Look around.
    tools: [list_files]
"""


def test_the_workflows_roles_are_what_the_guards_enforce(runtime: Runtime, model: tuple[str, Script]) -> None:
    """A custom role's mandatory tool is demanded; a redefined role demands its new tool, not the shipped one."""
    _, script = model
    script.answers = {"auditor_a": [envelope("Looks fine. [STATUS: SUCCESS]")],  # never read anything
                      "research_b": [envelope("x", [{"tool": "list_files", "argument": "."}]),
                                     envelope("Nothing here. [STATUS: SUCCESS]")]}  # fmt: skip
    _, state = run(runtime, ROLES)
    assert state.nodes["research_b"].status == "succeeded"  # no web_search demanded of the redefined role
    assert state.pause is not None and state.pause.agent == "auditor_a"
    assert state.pause.reason.startswith("Protocol violation: agent 'auditor_a' did not execute /read_file")
