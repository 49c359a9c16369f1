"""An approval in a run is bound to the exact call it held: the operator retries the pause that held a call, the
agent asks again, and that identical call (tool, target, content) runs — once. A changed call is held again; skipping
approves nothing; the approval is spent when the call goes through."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groundstate.runtime import TOOL_RESULT, Runtime

from .conftest import Script, envelope
from .test_guards import DANGER


def delete(target: str) -> list[dict[str, str]]:
    return [{"tool": "delete_file", "argument": target}]


def start(runtime: Runtime) -> tuple[str, Path]:
    run_id = runtime.create(DANGER, "danger.yaml", "scripted")
    workspace = runtime.home / "runs" / run_id / "workspace"
    workspace.mkdir(parents=True)
    for name in ("keep.txt", "other.txt"):
        (workspace / name).write_text(name)
    return run_id, workspace


def test_retrying_a_held_call_lets_that_exact_call_run_once(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.by_round = True
    script.answers = {
        "coder_x": [
            envelope("Cleaning.", delete("keep.txt")),
            envelope("[BYPASS: nothing to compute] Done. [STATUS: SUCCESS]"),
        ]
    }
    run_id, workspace = start(runtime)
    state = asyncio.run(runtime.drive(run_id))
    assert state.pause is not None and state.pause.reason.startswith("The agent asked to delete a file.")
    assert (workspace / "keep.txt").exists()
    held = state.pause.held_call

    runtime.decide(run_id, "retry", actor="operator:olga")
    assert len(runtime.store.state(run_id).approved_calls["coder_x"]) == 1
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "completed" and not (workspace / "keep.txt").exists()  # the approved call ran
    results = [e.payload for e in runtime.store.events(run_id) if e.type == TOOL_RESULT]
    assert [(r["tool"], r["status"]) for r in results] == [("delete_file", "/success")]
    assert results[0]["call"] != held and state.approved_calls["coder_x"] == []  # a new call, the approval spent


def test_a_changed_call_is_held_again_and_a_skip_approves_nothing(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.by_round = True
    script.answers = {"coder_x": [envelope("Cleaning.", delete("keep.txt"))]}
    run_id, workspace = start(runtime)
    asyncio.run(runtime.drive(run_id))
    runtime.decide(run_id, "retry")
    script.answers = {"coder_x": [envelope("Cleaning.", delete("other.txt"))]}  # asks for something else now
    state = asyncio.run(runtime.drive(run_id))
    assert state.pause is not None and state.pause.reason.startswith("The agent asked to delete a file.")
    assert (workspace / "keep.txt").exists() and (workspace / "other.txt").exists()  # neither ran
    assert state.approved_calls["coder_x"] != []  # keep.txt's approval is still unused

    runtime.decide(run_id, "skip")
    state = runtime.store.state(run_id)
    assert state.approved_calls["coder_x"] == [state.approved_calls["coder_x"][0]]  # the skip added none
    assert (workspace / "other.txt").exists()
