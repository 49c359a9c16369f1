"""Lifecycle: concurrency, many runs, racing decisions, kill and resume, cortex Interrupt and SpawnAgent, and
every event type really emitted."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from groundstate.runtime import (
    AGENT_COMPLETED,
    AGENT_STARTED,
    APPROVAL_DECIDED,
    EVENT_TYPES,
    NODE_CREATED,
    RUN_ABORTED,
    RUN_RESUMED,
    RUN_STARTED,
    DecisionError,
    Event,
    EventStore,
    Runtime,
    make_backend,
)

from .conftest import Script, envelope
from .test_shadow_runs import DONE as SHADOW_DONE
from .test_shadow_runs import FLOW as SHADOWED
from .test_shadow_runs import HOLDS_WRITES, WRITE, shadowed_runtime

SEARCH = [{"tool": "web_search", "argument": "home battery market"}]
BRANCHES = """
name: branches
agents:
  - id: research_left
    instructions: left
    tools: [web_search]
  - id: research_right
    instructions: right
    tools: [web_search]
  - id: writer_join
    instructions: join
    depends_on: [research_left, research_right]
"""
SEEN: set[str] = set()


def answers() -> dict[str, list[object]]:
    done = envelope("Found. [STATUS: SUCCESS]")
    return {"research_left": [envelope("x", SEARCH), done], "research_right": [envelope("x", SEARCH), done],
            "writer_join": [envelope("Joined. [STATUS: SUCCESS]")],
            "writer_extra": [envelope("Extra. [STATUS: SUCCESS]")]}  # fmt: skip


def record(runtime: Runtime, run_id: str) -> list[Event]:
    events = runtime.store.events(run_id)
    SEEN.update(e.type for e in events)
    return events


def test_branches_run_concurrently_and_runs_run_side_by_side(runtime: Runtime, model: tuple[str, Script]) -> None:
    _, script = model
    script.answers, script.by_round = answers(), True
    script.delays = {"research_left": 0.4, "research_right": 0.4}
    first, second = runtime.create(BRANCHES, "b.yaml", "scripted"), runtime.create(BRANCHES, "b.yaml", "scripted")

    async def both() -> list[str]:
        states = await asyncio.gather(runtime.drive(first), runtime.drive(second))
        return [s.status for s in states]

    assert asyncio.run(both()) == ["completed", "completed"]
    for run_id in (first, second):
        kinds = [(e.type, e.agent) for e in record(runtime, run_id)]
        started = [kinds.index((AGENT_STARTED, a)) for a in ("research_left", "research_right")]
        finished = [kinds.index((AGENT_COMPLETED, a)) for a in ("research_left", "research_right")]
        assert max(started) < min(finished)  # both branches were in flight at once


def test_decisions_race_and_only_one_applies(tmp_path: Path, runtime: Runtime, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"research_left": [envelope("no search. [STATUS: SUCCESS]")], **{
        k: v for k, v in answers().items() if k != "research_left"}}  # fmt: skip
    run_id = runtime.create(BRANCHES, "b.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "awaiting_approval"
    other = Runtime(EventStore(runtime.store.url), tmp_path, backend=make_backend(f"openai-chat:s@{url}"))
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def decide(which: Runtime) -> None:
        barrier.wait()
        try:
            which.decide(run_id, "skip")
            outcomes.append("applied")
        except DecisionError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=decide, args=(runtime if i % 2 else other,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("applied") == 1
    assert all("not awaiting approval: nothing to decide" in o for o in outcomes if o != "applied")
    assert [e.type for e in record(runtime, run_id)].count(APPROVAL_DECIDED) == 1


def test_a_killed_process_resumes_without_rerunning_completed_agents(
    tmp_path: Path, runtime: Runtime, model: tuple[str, Script]
) -> None:
    url, script = model
    script.answers = answers()
    script.delays = {"writer_join": 60}
    flow = tmp_path / "branches.yaml"
    flow.write_text(BRANCHES)
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "GROUNDSTATE_LEASE_SECONDS": "3"}
    db = f"sqlite:///{tmp_path / 'killed.db'}"
    child = subprocess.Popen([sys.executable, "-m", "groundstate", "run", str(flow), "--db", db,
                              "--model", f"openai-chat:scripted@{url}"], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    store = EventStore(db)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = store.runs()
        if runs and any(e.type == AGENT_STARTED and e.agent == "writer_join" for e in store.events(runs[0]["id"])):
            break
        time.sleep(0.1)
    else:
        child.kill()
        pytest.fail(f"the run never reached writer_join: {child.stderr.read() if child.stderr else b''!r}")
    child.send_signal(signal.SIGKILL)
    child.wait()
    run_id = store.runs()[0]["id"]
    assert store.state(run_id).nodes["writer_join"].status == "running"  # it died mid-invocation
    script.delays = {}
    # its lease has not expired, but its holder is a process of this host that is gone (pid and start time): the
    # run is interrupted at once, and a resume need not wait the lease out (test_boundary_attacks.py resumes one)
    assert store.lease(run_id) is not None and store.runs()[0]["status"] == "interrupted"
    listed = subprocess.run([sys.executable, "-m", "groundstate", "runs", "list", "--db", db], env={**env,
                            "COLUMNS": "300"}, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert f"interrupted — its driver is gone; resume with: groundstate runs resume {run_id}" in listed.stdout
    resumed = Runtime(store, tmp_path / "home", backend=make_backend(f"openai-chat:scripted@{url}"))
    state = asyncio.run(resumed.drive(run_id))
    assert state.status == "completed"
    events = record(resumed, run_id)
    starts = [e.agent for e in events if e.type == AGENT_STARTED]
    assert starts.count("research_left") == 1 and starts.count("research_right") == 1  # not run twice
    assert starts.count("writer_join") == 2
    resumed_event = next(e for e in events if e.type == RUN_RESUMED)
    assert resumed_event.payload["restarted"] == ["writer_join"]
    started = next(e for e in events if e.type == RUN_STARTED)
    assert started.payload["driver"] != resumed_event.payload["driver"]  # each segment names the process driving it


def patterns_file(tmp_path: Path) -> Path:
    path = tmp_path / "patterns.json"
    path.write_text(json.dumps([
        {"id": "stop_forbidden", "name": "Forbidden search", "trigger_event": "ToolCall",
         "condition": 'tool_call(Run, Agent, Seq, /web_search, Q), :string:contains(Q, "forbidden")',
         "action": {"Interrupt": {"reason": "a forbidden search"}}},
        {"id": "stop_any_forbidden", "name": "Forbidden anything", "trigger_event": "ToolCall",
         "condition": 'tool_call(Run, Agent, Seq, Tool, Q), :string:contains(Q, "forbidden")',
         "action": {"Interrupt": {"reason": "a forbidden argument"}}},
        {"id": "add_extra", "name": "Extra writer", "trigger_event": "AgentCompleted",
         "condition": 'Agent = "research_left"',
         "action": {"SpawnAgent": {"agent": {"id": "writer_extra", "instructions": "extra",
                                             "depends_on": ["research_left"]}}}},
    ]))  # fmt: skip
    return path


def test_cortex_interrupt_and_spawn(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'c.db'}"), tmp_path,
                      backend=make_backend(f"openai-chat:s@{url}"), patterns_path=patterns_file(tmp_path))  # fmt: skip
    script.answers, script.by_round = answers(), True
    run_id = runtime.create(BRANCHES, "b.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "completed" and state.nodes["writer_extra"].status == "succeeded"
    spawned = next(e for e in record(runtime, run_id) if e.type == NODE_CREATED and e.payload.get("spec"))
    assert spawned.payload["agent"] == "writer_extra"

    script.requests.clear()
    script.answers = {**answers(), "research_left": [envelope("x", [{"tool": "web_search", "argument": "forbidden"}])]}
    run_id = runtime.create(BRANCHES, "b.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "aborted" and set(str(state.outcome).split("; ")) == {
        "a forbidden search", "a forbidden argument"}  # both interrupts fired: both are reported  # fmt: skip
    aborted = next(e for e in record(runtime, run_id) if e.type == RUN_ABORTED)
    assert aborted.agent == "research_left" and len(aborted.payload["interrupts"]) == 2
    record(runtime, run_id)


def test_a_run_that_cannot_start_fails(tmp_path: Path) -> None:
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'f.db'}"), tmp_path)
    run_id = runtime.create(BRANCHES, "b.yaml", "local:/nonexistent/model.gguf")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "failed" and "model.gguf" in (state.outcome or "")
    record(runtime, run_id)


def test_every_event_type_is_emitted(runtime: Runtime, model: tuple[str, Script]) -> None:
    """Runs last in this module: the union of what the tests above saw, plus a failing agent that is skipped."""
    _, script = model
    unauthorised = (401, json.dumps({"error": {"message": "bad key", "code": "invalid_api_key"}}).encode())
    script.answers = {**answers(), "research_left": [unauthorised]}
    run_id = runtime.create(BRANCHES, "b.yaml", "scripted")
    asyncio.run(runtime.drive(run_id))
    runtime.repin(run_id)
    runtime.decide(run_id, "skip")
    asyncio.run(runtime.drive(run_id))
    record(runtime, run_id)
    script.by_round, script.answers = True, {"writer_a": [WRITE, SHADOW_DONE]}  # a shadow policy that disagrees
    shadowed = shadowed_runtime(runtime.home / "shadowed", model[0], HOLDS_WRITES)
    shadowed_id = shadowed.create(SHADOWED, "shadowed.yaml", "scripted")
    asyncio.run(shadowed.drive(shadowed_id))
    record(shadowed, shadowed_id)
    assert SEEN == set(EVENT_TYPES)


def test_cli_run_with_decide(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {**answers(), "research_left": [envelope("none. [STATUS: NULL]")]}
    flow = tmp_path / "branches.yaml"
    flow.write_text(BRANCHES)
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "160"}
    command = [sys.executable, "-m", "groundstate", "run", str(flow), "--model", f"openai-chat:scripted@{url}",
               "--decide", "skip", "--concurrency", "1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "QUALITY PAUSE" in done.stdout and "Protocol violation: agent 'research_left'" in done.stdout
    assert "also: Semantic null: agent 'research_left'" in done.stdout  # every reason is on the card
    assert "Context drought" not in done.stdout  # research_right still gave the writer content
    assert done.stdout.strip().endswith("completed")
    bad = subprocess.run([*command[:7], "--decide", "maybe"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "--decide must be one of retry, skip, abort" in bad.stdout
    broken = tmp_path / "broken.yaml"
    broken.write_text(BRANCHES.replace("depends_on: [research_left, research_right]", "depends_on: [nobody]"))
    refused = subprocess.run([sys.executable, "-m", "groundstate", "run", str(broken)], capture_output=True, text=True,
                             env=env)  # fmt: skip
    assert refused.returncode == 2 and "depends_on 'nobody', which is not an agent of the workflow" in refused.stdout


def _read_until(fd: int, text: str, seen: list[str], timeout: float = 60) -> None:
    import select

    deadline = time.monotonic() + timeout
    while text not in "".join(seen):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never appeared in: {''.join(seen)[-2000:]}")
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen.append(os.read(fd, 65536).decode("utf-8", "replace"))
            except OSError:
                return


def test_cli_asks_the_operator_on_a_terminal(tmp_path: Path, model: tuple[str, Script]) -> None:
    """On a terminal, a pause asks: retry / edit / skip / abort; 'edit' takes new instructions, then retries."""
    import pty

    url, script = model
    memory, found = envelope("Memory. [STATUS: SUCCESS]"), envelope("Found. [STATUS: SUCCESS]")
    script.answers = {**answers(), "research_left": [memory, envelope("x", SEARCH), found]}
    flow = tmp_path / "branches.yaml"
    flow.write_text(BRANCHES)
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "200", "TERM": "dumb"}
    parent, child = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "groundstate", "run", str(flow), "--model",
                                f"openai-chat:scripted@{url}"], stdin=child, stdout=child, stderr=child, env=env,
                               close_fds=True)  # fmt: skip
    os.close(child)
    seen: list[str] = []
    try:
        _read_until(parent, "decision", seen)
        assert "Protocol violation: agent 'research_left'" in "".join(seen)
        os.write(parent, b"edit\n")
        _read_until(parent, "new instructions", seen)
        os.write(parent, b"Search the corpus for home batteries.\n")
        _read_until(parent, "completed", seen)
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        os.close(parent)
    retried = [b for a, b in script.requests if a == "research_left"][1]["messages"][1]["content"]
    assert retried == "Task: Search the corpus for home batteries."
