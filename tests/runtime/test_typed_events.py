"""Typed events: logs written by the release before them load and replay identically, and dump to the same JSON;
a log that fits no event model is a clear StoreCorrupt naming run and event."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groundstate.runtime import (
    AGENT_COMPLETED,
    AGENT_STARTED,
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    EVENT_CLASSES,
    EVENT_TYPES,
    NODE_EDGES,
    RUN_COMPLETED,
    RUN_EDGES,
    TOOL_CALL,
    TOOL_RESULT,
    AgentCompleted,
    AgentStarted,
    Event,
    EventMisfit,
    EventRefused,
    EventStore,
    NodeCreated,
    RunStarted,
    RunState,
    StoreCorrupt,
    ToolCall,
    ToolResult,
    body_of,
)

FIXTURES = Path(__file__).parent / "fixtures" / "run-logs-0.1.0.json.gz"


def release_logs() -> list[dict[str, Any]]:
    """Run logs the release before typed events wrote (harvested from its own runtime tests), each with the state
    that release replayed from it."""
    with gzip.open(FIXTURES, "rt") as f:
        logs: list[dict[str, Any]] = json.load(f)["logs"]
    return logs


def events_of(log: dict[str, Any]) -> list[Event]:
    return [Event.parsed(e["run_id"], e["seq"], e["type"], e["agent"], e["payload"],
                            datetime.fromisoformat(e["at"]), e["actor"]) for e in log["events"]]  # fmt: skip


def as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def test_the_fixtures_cover_every_event_type() -> None:
    written = {e["type"] for log in release_logs() for e in log["events"]}
    assert written == set(EVENT_TYPES)


@pytest.mark.parametrize(("event_type", "key"), [
    (TOOL_RESULT, "journal"),  # a call's result replayed from the journal after a crash
    ("AgentCompleted", "archived"),  # settled actions retention moved to cold storage
    (APPROVAL_DECIDED, "instructions"),  # a retry with the operator's new instructions
    ("RunCreated", "models"),  # the configuration's model for an agent, recorded at creation
])  # fmt: skip
def test_the_fixtures_hold_the_rarer_shapes_of_payload(event_type: str, key: str) -> None:
    assert any(e["type"] == event_type and e["payload"].get(key) for log in release_logs() for e in log["events"])


@pytest.mark.parametrize("log", release_logs(), ids=lambda log: f"{log['run_id']}-{log['state']['status']}")
def test_a_release_log_replays_to_the_state_that_release_replayed(log: dict[str, Any]) -> None:
    """Field for field as that release replayed it; a field the state gained since (``grants``) is at its default,
    since the release wrote nothing it could be read from."""
    state = json.loads(as_json(dataclasses.asdict(RunState.replay(log["run_id"], events_of(log)))))
    assert {key: state[key] for key in log["state"]} == log["state"]
    fresh = json.loads(as_json(dataclasses.asdict(RunState(log["run_id"]))))
    assert {key: value for key, value in state.items() if key not in log["state"]} == \
        {key: fresh[key] for key in state if key not in log["state"]}  # fmt: skip


@pytest.mark.parametrize("log", release_logs(), ids=lambda log: log["run_id"])
def test_a_release_log_dumps_to_the_json_it_was_read_from(log: dict[str, Any]) -> None:
    """Key for key and value for value: an int stays an int (``0``, not ``0.0``), an absent key stays absent."""
    for event, stored in zip(events_of(log), log["events"], strict=True):
        assert as_json(event.payload) == as_json(stored["payload"]), (event.type, event.seq)
        assert as_json(event.to_json()) == as_json(stored)


def test_a_key_no_model_names_is_kept() -> None:
    body = body_of(TOOL_CALL, {"tool": "web_search", "target": "x", "payload": "", "written_by": "an older one"})
    assert body.to_payload() == {"tool": "web_search", "target": "x", "payload": "", "written_by": "an older one"}


def test_the_machines_are_keyed_by_the_event_classes() -> None:
    run_keys = {kind for row in RUN_EDGES.values() for kind in row}
    node_keys = {key[0] if isinstance(key, tuple) else key for row in NODE_EDGES.values() for key in row}
    assert run_keys == set(EVENT_CLASSES)
    assert node_keys <= set(EVENT_CLASSES)
    assert EVENT_TYPES == tuple(kind.__name__ for kind in EVENT_CLASSES)


@pytest.mark.parametrize(
    ("event_type", "payload", "said"),
    [
        (AGENT_STARTED, {"attempt": "1"}, "attempt"),  # a string where a number was written
        (AGENT_STARTED, {}, "attempt"),  # a key the event needs
        (TOOL_CALL, {"tool": 7}, "tool"),
        (APPROVAL_DECIDED, {"decision": "maybe", "pause": 3}, "decision"),
        (APPROVAL_REQUESTED, {"category": "safety", "reason": "r", "reasons": [{"category": "safety"}]}, "reasons"),
        (RUN_COMPLETED, [], "not an object"),
        ("RunExploded", {}, "not an event type"),
        # absurd but well-typed: a number no JSON reader holds exactly, or one below where it starts
        (AGENT_STARTED, {"attempt": 10**30}, "attempt"),
        (AGENT_STARTED, {"attempt": 0}, "attempt"),
        (AGENT_STARTED, {"attempt": 1, "journal": -1}, "journal"),
        (TOOL_RESULT, {"call": -4, "tool": "t", "decision": None, "status": None}, "call"),
        (APPROVAL_DECIDED, {"decision": "retry", "pause": 2**53}, "pause"),
        (AGENT_COMPLETED, {"output": "", "status_tag": None, "usage": {"input_tokens": -5}}, "usage"),
        (AGENT_COMPLETED, {"output": "", "status_tag": None, "usage": {"cost": -0.5}}, "usage"),
    ],
)
def test_a_payload_that_fits_no_model_is_refused_saying_what(event_type: str, payload: Any, said: str) -> None:
    with pytest.raises(EventMisfit, match=said):
        body_of(event_type, payload)


def test_a_corrupted_log_is_store_corrupt_naming_run_and_event(tmp_path: Path) -> None:
    url, run_id = corrupted(tmp_path, json.dumps({"attempt": "one"}))  # the attempt's number is now text
    with pytest.raises(StoreCorrupt, match=rf"run {run_id}: event 4 \(AgentStarted\).*attempt"):
        EventStore(url).state(run_id)


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))


@given(extra=st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda k: k not in ToolResult.model_fields),
                             JSON_SCALARS, max_size=4),
       output=st.text(max_size=20), status=st.one_of(st.none(), st.just("/success")))
def test_what_a_body_is_read_from_is_what_it_dumps(extra: dict[str, Any], output: str, status: str | None) -> None:
    payload = {"call": 3, "tool": "read_file", "decision": "/permit", "status": status, "output": output, **extra}
    assert as_json(body_of(TOOL_RESULT, payload).to_payload()) == as_json(payload)


def corrupted(tmp_path: Path, payload: str, agent: str = "writer_a") -> tuple[str, str]:
    """A run whose AgentStarted (event 4) was rewritten outside groundstate: its database URL and the run's id."""
    database = tmp_path / "runs.sqlite"
    store = EventStore(f"sqlite:///{database}")
    run_id = store.create_run("w", "name: w\nagents:\n  - id: writer_a\n    instructions: write\n", None)
    store.append(run_id, NodeCreated(agent="writer_a"))
    store.append(run_id, RunStarted(model=None, driver="me"))
    started = store.append(run_id, AgentStarted(attempt=1, backend="scripted"), "writer_a")
    with sqlite3.connect(database) as db:
        db.execute("UPDATE events SET payload = ?, agent = ? WHERE run_id = ? AND seq = ?",
                   (payload, agent, run_id, started.seq))  # fmt: skip
    return f"sqlite:///{database}", run_id


def test_a_number_that_overflows_to_infinity_is_a_misfit(tmp_path: Path) -> None:
    """Found by an attack: ``NaN`` and ``Infinity`` were refused, ``1e400`` (infinity once parsed) was not — and
    ``runs show --json`` then printed ``Infinity``, which no strict JSON reader accepts."""
    url, run_id = corrupted(tmp_path, '{"attempt": 1, "overflow": 1e400}')
    with pytest.raises(StoreCorrupt, match=rf"run {run_id}: event 4 \(AgentStarted\).*overflows"):
        EventStore(url).state(run_id)


def test_an_agents_event_that_names_no_agent_of_the_run_is_refused(tmp_path: Path) -> None:
    """Found by an attack: an AgentStarted whose agent column named nobody replayed into a state where the
    agent's own events were lost (it showed running, with no output)."""
    url, run_id = corrupted(tmp_path, '{"attempt": 1}', agent="nobody")
    with pytest.raises(StoreCorrupt, match=rf"run {run_id}.*names no agent of the run \('nobody'\)"):
        EventStore(url).state(run_id)
    store = EventStore(f"sqlite:///{tmp_path / 'clean.sqlite'}")
    clean = store.create_run("w", "name: w\n", None)
    store.append(clean, RunStarted())
    with pytest.raises(EventRefused, match="names no agent of the run"):
        store.append(clean, ToolCall(tool="web_search"), "somebody")


def test_half_a_character_is_a_replacement_character_not_a_run_nobody_can_show(tmp_path: Path) -> None:
    """Found by an attack: a lone surrogate (a hostile stream's ``\\ud800`` escape, kept by the JSON parser) in a
    stored string made ``runs show`` a traceback and the console a bare 500, while the run could still be driven."""
    assert AgentCompleted(output="a\ud800b", status_tag=None).output == "a\ufffdb"
    url, run_id = corrupted(tmp_path, '{"attempt": 1, "instructions": "do \\ud800 this"}')
    assert EventStore(url).events(run_id)[3].payload["instructions"] == "do \ufffd this"
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    for extra in ([], ["--events"], ["--json"]):
        shown = subprocess.run([sys.executable, "-m", "groundstate", "runs", "show", run_id, "--db", url, *extra],
                               capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
        assert shown.returncode == 0 and "Traceback" not in shown.stderr + shown.stdout, shown.stderr
