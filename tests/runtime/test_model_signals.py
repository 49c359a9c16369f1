"""What a model sends besides its answer text reaches the run: refusals, native tool calls, reasoning, finish.

The scripted provider on loopback streams real Chat Completions chunks; the effect is checked on the run (a pause
with the reason, the recorded thinking), not on which function was called.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from groundstate.runtime import HELD_FOR_OPERATOR, TOOL_CALL, TOOL_RESULT, Runtime

from .conftest import Script, envelope

FLOW = """
name: signals
agents:
  - id: writer_a
    instructions: Write it.
"""
CODER = """
name: held
agents:
  - id: coder_x
    instructions: Change the files.
    tools: [read_file, delete_file, execute_python]
"""


def chunks(*deltas: dict[str, Any], finish: str = "stop") -> bytes:
    out: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in out) + b"data: [DONE]\n\n"


def answer_with(*extra: dict[str, Any], finish: str = "stop") -> bytes:
    text = json.dumps(envelope("All written. [STATUS: SUCCESS]"))
    return chunks(*extra, *({"content": text[i : i + 9]} for i in range(0, len(text), 9)), finish=finish)


def drive(runtime: Runtime, flow: str = FLOW) -> tuple[str, Any]:
    run_id = runtime.create(flow, "flow.yaml", "scripted")
    return run_id, asyncio.run(runtime.drive(run_id))


def test_a_refusal_pauses_the_run_with_its_text(runtime: Runtime, model: tuple[str, Script]) -> None:
    model[1].answers = {"writer_a": [answer_with({"refusal": "I will not write that."})]}
    _, state = drive(runtime)
    assert state.status == "awaiting_approval" and state.pause is not None
    reasons = [state.pause.reason, *state.pause.others]
    assert "Refusal: the model of agent 'writer_a' refused: I will not write that." in reasons


def test_a_native_tool_call_is_a_protocol_violation_and_does_not_run(
    runtime: Runtime, model: tuple[str, Script]
) -> None:
    call = {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                            "function": {"name": "delete_file", "arguments": "{\"path\": \"a.txt\"}"}}]}  # fmt: skip
    model[1].answers = {"writer_a": [answer_with(call, finish="tool_calls")]}
    run_id, state = drive(runtime)
    assert state.status == "awaiting_approval" and state.pause is not None
    assert any("called delete_file as a native tool call" in r for r in [state.pause.reason, *state.pause.others])
    assert TOOL_CALL not in [e.type for e in runtime.store.events(run_id)]


def test_streamed_reasoning_is_kept_as_thinking(runtime: Runtime, model: tuple[str, Script]) -> None:
    model[1].answers = {"writer_a": [answer_with({"reasoning_content": "First, the outline."})]}
    _, state = drive(runtime)
    assert state.status == "completed"
    assert "First, the outline." in state.nodes["writer_a"].thinking


def test_every_tool_call_is_answered_when_a_later_call_pauses(runtime: Runtime, model: tuple[str, Script]) -> None:
    """The first call is answered as not run; the held one is answered by the pause that names it."""
    tools = [{"tool": "read_file", "argument": "notes.txt"}, {"tool": "delete_file", "argument": "notes.txt"}]
    model[1].answers = {"coder_x": [envelope("Working.", tools)]}
    run_id, state = drive(runtime, CODER)
    events = runtime.store.events(run_id)
    calls = [e.seq for e in events if e.type == TOOL_CALL]
    results = {e.payload["call"]: e.payload for e in events if e.type == TOOL_RESULT}
    pause = next(e for e in events if e.type == "ApprovalRequested")
    assert len(calls) == 2 and results[calls[0]]["reason"] == HELD_FOR_OPERATOR and results[calls[0]]["status"] is None
    assert calls[1] not in results and pause.payload["held_call"] == calls[1]
    assert state.pause is not None and state.pause.category == "safety"


def test_the_runs_record_of_what_the_model_sent_is_what_it_sent(
    runtime: Runtime, model: tuple[str, Script], tmp_path: Path
) -> None:
    """The finished checkpoint's report (what ``policy replay --run`` re-decides from) keeps the answer whole: its
    text, the model, the refusal and the native call it carried and its finish, as the provider streamed them —
    written without ``dataclasses.asdict``'s deep copy, which cost 2 % of a node's time."""
    call = {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                            "function": {"name": "delete_file", "arguments": "{}"}}]}  # fmt: skip
    model[1].answers = {"writer_a": [answer_with({"refusal": "I will not."}, call, finish="tool_calls")]}
    run_id, state = drive(runtime)
    assert state.status == "awaiting_approval"
    with sqlite3.connect(tmp_path / "gs.db") as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM guard_reports WHERE run_id = ? "
                                                             "ORDER BY id", (run_id,))]  # fmt: skip
    [finished] = [report for report in bodies if report["m"] == "finished"]
    answer = finished["a"][5]
    assert answer["output"] == "All written. [STATUS: SUCCESS]"
    assert answer["backend"] == f"openai-chat:scripted@{model[0]}"
    assert answer["signals"] == {"refusals": ["I will not."], "native_tool_calls": ["delete_file"],
                                 "finish": "tool_calls"}  # fmt: skip
    assert (answer["fallbacks"], answer["memory"], len(answer["usage"])) == ([], [], 3)
    assert sorted(finished["a"][6]) == ["cost", "seconds", "tokens", "wall_seconds"]  # what the run had spent
    assert finished["d"][0] == "pause"
