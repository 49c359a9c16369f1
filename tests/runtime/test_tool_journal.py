"""The tool journal in the runtime: a driver killed (SIGKILL) while a tool call runs leaves it in doubt — the
resumed run pauses for an operator instead of running it again; a driver killed after a call finished has that
call's recorded result replayed on resume, so its effect happens once; an operator's retry runs calls again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from groundstate.runtime import AGENT_STARTED, APPROVAL_REQUESTED, TOOL_RESULT, EventStore, Runtime, make_backend
from groundstate.store import ToolJournal

from .conftest import Script, envelope

FLOW = """
name: journal
agents:
  - id: writer_x
    instructions: do the task
    tools: [execute_python]
"""


def appends(sleep: int = 0) -> dict[str, str]:
    """A tool call with an effect: one line appended to effects.txt (then, optionally, a long sleep)."""
    code = f"import time\nopen('effects.txt', 'a').write('ran\\n')\ntime.sleep({sleep})\nprint('appended')\n"
    return {"tool": "execute_python", "argument": code}


def start(tmp_path: Path, url: str) -> tuple[subprocess.Popen[bytes], str]:
    """``groundstate run`` in a subprocess (a driver to kill), its lease short."""
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW)
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "GROUNDSTATE_LEASE_SECONDS": "3"}
    db = f"sqlite:///{tmp_path / 'journal.db'}"
    child = subprocess.Popen([sys.executable, "-m", "groundstate", "run", str(flow), "--db", db,
                              "--model", f"openai-chat:scripted@{url}"], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    return child, db


def kill_when(child: subprocess.Popen[bytes], ready: object, what: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            child.send_signal(signal.SIGKILL)
            child.wait()
            time.sleep(3.5)  # the dead driver's lease expires
            return
        time.sleep(0.1)
    child.kill()
    pytest.fail(f"the run never reached {what}: {child.stderr.read() if child.stderr else b''!r}")


def effects(tmp_path: Path, run_id: str) -> list[str]:
    path = tmp_path / "home" / "runs" / run_id / "workspace" / "effects.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_a_call_in_flight_when_the_driver_dies_pauses_the_resumed_run(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script.by_round = True
    script.answers = {"writer_x": [envelope("working", [appends(sleep=60)]), envelope("done [STATUS: SUCCESS]")]}
    child, db = start(tmp_path, url)
    journal = ToolJournal(db)

    def mid_call() -> bool:  # journaled, and the program has had its effect (it sleeps now)
        runs = EventStore(db).runs()
        return bool(runs) and bool(journal.in_doubt("run:")) and effects(tmp_path, runs[0]["id"]) == ["ran"]

    kill_when(child, mid_call, "its tool call")
    store = EventStore(db)
    run_id = store.runs()[0]["id"]
    assert effects(tmp_path, run_id) == ["ran"]
    asked = len(script.requests)

    resumed = Runtime(store, tmp_path / "home", backend=make_backend(f"openai-chat:scripted@{url}"))
    state = asyncio.run(resumed.drive(run_id))
    assert state.status == "awaiting_approval" and state.pause is not None
    assert state.pause.category == "safety" and state.pause.agent == "writer_x"
    assert state.pause.reason.startswith("Tool call in doubt: execute_python on ''")
    assert "may or may not have taken effect" in state.pause.reason
    assert len(script.requests) == asked and effects(tmp_path, run_id) == ["ran"]  # nothing was asked or run again
    why = next(e for e in store.events(run_id) if e.type == APPROVAL_REQUESTED).payload["why"]
    assert "tool_in_doubt(" in str(why)  # the derivation names the journal's fact

    script.answers = {"writer_x": [envelope("working", [appends()]), envelope("done [STATUS: SUCCESS]")]}
    resumed.decide(run_id, "retry", actor="operator:olga")  # the operator's choice: it may run again
    assert journal.in_doubt(f"run:{run_id}/") == []
    assert asyncio.run(resumed.drive(run_id)).status == "completed"
    assert effects(tmp_path, run_id) == ["ran", "ran"]
    resolved = [e for e in journal.entries(f"run:{run_id}/") if e.state == "done"]
    assert len(resolved) == 1 and resolved[0].position == 1  # the call in doubt ran again, in its own place


def test_a_finished_call_is_not_run_again_when_the_run_resumes(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.by_round = True
    script.answers = {"writer_x": [envelope("working", [appends()]), envelope("done [STATUS: SUCCESS]")]}
    script.delays = {"writer_x": [0, 60]}  # the second round's answer never comes before the kill
    child, db = start(tmp_path, url)
    kill_when(child, lambda: len(script.requests) == 2, "its second round")
    store = EventStore(db)
    run_id = store.runs()[0]["id"]
    assert effects(tmp_path, run_id) == ["ran"]
    script.delays = {}

    resumed = Runtime(store, tmp_path / "home", backend=make_backend(f"openai-chat:scripted@{url}"))
    assert asyncio.run(resumed.drive(run_id)).status == "completed"
    assert effects(tmp_path, run_id) == ["ran"]  # the call was not run again
    events = store.events(run_id)
    results = [e.payload for e in events if e.type == TOOL_RESULT]
    assert [(r["status"], r.get("journal")) for r in results] == [("/success", None), ("/success", "replayed")]
    assert results[0]["output"] == results[1]["output"]  # the model got the recorded result
    assert [e.payload["journal"] for e in events if e.type == AGENT_STARTED] == [1, 1]  # the same epoch


def test_an_operators_retry_runs_the_calls_again(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.by_round = True
    script.answers = {"writer_x": [envelope("working", [appends()]), envelope("nothing [STATUS: NULL]")]}
    store = EventStore(f"sqlite:///{tmp_path / 'retry.db'}")
    runtime = Runtime(store, tmp_path / "home", backend=make_backend(f"openai-chat:scripted@{url}"))
    run_id = runtime.create(FLOW, "flow.yaml", "scripted")
    assert asyncio.run(runtime.drive(run_id)).status == "awaiting_approval"  # semantic null
    runtime.decide(run_id, "retry")
    script.answers = {"writer_x": [envelope("working", [appends()]), envelope("done [STATUS: SUCCESS]")]}
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    assert effects(tmp_path, run_id) == ["ran", "ran"]  # a new attempt: a new epoch, its calls run
    events = store.events(run_id)
    assert [e.payload["journal"] for e in events if e.type == AGENT_STARTED] == [1, 2]
    assert not [e for e in events if e.type == TOOL_RESULT and e.payload.get("journal")]
