"""The run's two state machines: every status has its edges, refused events change nothing, a tampered log is
reported as corrupt instead of being replayed into a state no run could reach."""

from __future__ import annotations

import asyncio
import copy
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.runtime import (
    AGENT_COMPLETED,
    AGENT_FAILED,
    AGENT_SKIPPED,
    AGENT_STARTED,
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    EVENT_TYPES,
    NODE_CREATED,
    NODE_EDGES,
    RUN_ABORTED,
    RUN_COMPLETED,
    RUN_CREATED,
    RUN_EDGES,
    RUN_FAILED,
    RUN_RESUMED,
    RUN_STARTED,
    TOOL_CALL,
    TOOL_RESULT,
    AgentCompleted,
    ApprovalDecided,
    Event,
    EventRefused,
    NodeStatus,
    PolicyRepinned,
    RunEnded,
    RunResumed,
    RunStarted,
    RunState,
    RunStatus,
    Runtime,
)

from .conftest import Script, envelope

WORKFLOW = "name: one\nagents:\n  - id: writer_x\n    instructions: write\n    tools: [write_file]\n"


def test_every_status_has_a_row_and_ended_runs_have_no_edges() -> None:
    assert set(RUN_EDGES) == set(RunStatus) and set(NODE_EDGES) == set(NodeStatus)
    assert RUN_EDGES[RunStatus.COMPLETED] == {} and RUN_EDGES[RunStatus.ABORTED] == {}
    assert RUN_EDGES[RunStatus.FAILED] == {RunResumed: RunStatus.RUNNING, PolicyRepinned: RunStatus.FAILED}
    assert {event.NAME for row in RUN_EDGES.values() for event in row} == set(EVENT_TYPES)


PAYLOADS: dict[str, dict[str, Any]] = {
    RUN_CREATED: {"workflow": "", "name": "n", "model": None},
    NODE_CREATED: {"agent": "a"},
    RUN_STARTED: {},
    RUN_RESUMED: {"restarted": []},
    AGENT_STARTED: {"attempt": 1},
    TOOL_CALL: {"tool": "write_file"},
    TOOL_RESULT: {"call": 1, "tool": "write_file", "decision": "/permit", "status": None},
    AGENT_COMPLETED: {"output": "x", "status_tag": None},
    AGENT_FAILED: {"error": "e"},
    AGENT_SKIPPED: {"by": "operator"},
    APPROVAL_REQUESTED: {"category": "safety", "reason": "r"},
    RUN_COMPLETED: {"summary": {}},
    RUN_FAILED: {"error": "e"},
    RUN_ABORTED: {"reason": "r"},
}
NOW = datetime.now(UTC)
steps = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(sorted(PAYLOADS)), st.sampled_from(["a", None])),
        st.tuples(st.just(APPROVAL_DECIDED), st.sampled_from(["retry", "skip", "abort"])),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_a_refused_event_changes_nothing_and_statuses_stay_in_their_machines(sequence: list[tuple[str, str]]) -> None:
    state, abort_decided = RunState("r"), False
    for seq, (event_type, extra) in enumerate(sequence, start=1):
        if event_type == APPROVAL_DECIDED:
            pause = state.pause.seq if state.pause else 10**6  # none open: a pause no event of the run is
            event = Event.parsed("r", seq, event_type, "a", {"decision": extra, "pause": pause}, NOW, "operator")
        else:
            event = Event.parsed("r", seq, event_type, extra, dict(PAYLOADS[event_type]), NOW, "runtime")
        before = copy.deepcopy(state)
        try:
            state.apply(event)
        except EventRefused as refused:
            assert state == before  # nothing moved
            if before.status in (RunStatus.COMPLETED, RunStatus.ABORTED):
                assert isinstance(refused, RunEnded)
            continue
        assert before.status not in (RunStatus.COMPLETED, RunStatus.ABORTED)
        assert isinstance(state.status, RunStatus)
        assert all(isinstance(node.status, NodeStatus) for node in state.nodes.values())
        abort_decided = abort_decided or event.payload.get("decision") == "abort"
        if state.status == RunStatus.AWAITING_APPROVAL and not abort_decided:
            assert state.pauses, "a run awaiting approval has a pause to decide (an abort is followed by RunAborted)"


def test_an_event_a_node_cannot_take_is_refused_before_it_is_stored(
    runtime: Runtime, model: tuple[str, Script]
) -> None:
    model[1].answers = {"writer_x": [envelope("done [STATUS: SUCCESS]")]}
    run_id = runtime.create(WORKFLOW, "one.yaml", "scripted")
    runtime.store.append(run_id, RunStarted())
    with pytest.raises(EventRefused, match=r"agent writer_x of run .* is pending: no AgentCompleted can follow"):
        runtime.store.append(run_id, AgentCompleted(output="never ran", status_tag=None), "writer_x")
    assert [e.type for e in runtime.store.events(run_id)] == [RUN_CREATED, NODE_CREATED, RUN_STARTED]
    with pytest.raises(EventRefused, match="is running: no ApprovalDecided event can follow"):
        runtime.store.append(run_id, ApprovalDecided(decision="retry", pause=1), "writer_x")
    assert runtime.store.state(run_id).nodes["writer_x"].status == NodeStatus.PENDING


def test_a_reordered_log_is_reported_as_corrupt(tmp_path: Path, runtime: Runtime, model: tuple[str, Script]) -> None:
    model[1].answers = {"writer_x": [envelope("done [STATUS: SUCCESS]")]}
    run_id = runtime.create(WORKFLOW, "one.yaml", "scripted")
    assert asyncio.run(runtime.drive(run_id)).status == RunStatus.COMPLETED
    with runtime.store.engine.begin() as db:  # RunStarted rewritten as RunCompleted: a run that never started
        db.exec_driver_sql("UPDATE events SET type = 'RunCompleted', payload = '{\"summary\": {}}' "
                           "WHERE run_id = ? AND seq = 3", (run_id,))  # fmt: skip
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "cli-home"), "COLUMNS": "300"}
    shown = subprocess.run([sys.executable, "-m", "groundstate", "runs", "show", run_id, "--db", runtime.store.url],
                           capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert shown.returncode == 2 and "Traceback" not in shown.stderr + shown.stdout
    assert f"run {run_id} is pending: no RunCompleted event can follow" in shown.stdout
    assert "changed outside groundstate" in shown.stdout
