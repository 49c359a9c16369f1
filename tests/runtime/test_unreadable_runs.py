"""A store changed outside groundstate, through the public surface: bytes that are not UTF-8 in an event's text
columns are a StoreCorrupt naming the run and the event (never the SQLite driver's traceback), and one damaged run
awaiting a decision is listed apart — the other runs' pauses stay in the inbox of the CLI, the console and its API.
Both were found by an attack on the typed event log."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from groundstate.runtime import AgentStarted, ApprovalRequested, EventStore, NodeCreated, RunStarted, StoreCorrupt

from ..console.conftest import serving
from .test_cli_decisions import groundstate

FLOW = "name: w\nagents:\n  - id: writer_a\n    instructions: write\n"
NOT_UTF8 = "CAST(x'7bff7d' AS TEXT)"  # '{', a byte no UTF-8 text holds, '}'


def awaiting_run(store: EventStore, reason: str) -> str:
    """A run paused for an operator's decision (event 5 is the ApprovalRequested, event 4 the AgentStarted)."""
    run_id = store.create_run("w", FLOW, None)
    store.append(run_id, NodeCreated(agent="writer_a"))
    store.append(run_id, RunStarted(model=None, driver="me"))
    store.append(run_id, AgentStarted(attempt=1, backend="scripted"), "writer_a")
    store.append(run_id, ApprovalRequested(category="quality", reason=reason), "writer_a")
    return run_id


def not_utf8(database: Path, run_id: str, column: str = "payload", seq: int = 4) -> None:
    """Write bytes that are no UTF-8 text into one column of one stored event, as a hand with the file could."""
    with sqlite3.connect(database) as db:
        db.execute(f"UPDATE events SET {column} = {NOT_UTF8} WHERE run_id = ? AND seq = ?",
                   (run_id, seq))  # fmt: skip


@pytest.fixture
def two_paused(tmp_path: Path) -> tuple[Path, str, str]:
    """A store with two runs awaiting a decision, the first of them damaged: (database, damaged, intact)."""
    database = tmp_path / "runs.sqlite"
    store = EventStore(f"sqlite:///{database}")
    damaged = awaiting_run(store, "the damaged run's reason")
    intact = awaiting_run(store, "the intact run's reason")
    store.engine.dispose()
    not_utf8(database, damaged)
    return database, damaged, intact


@pytest.mark.parametrize("column", ["payload", "type", "agent", "actor"])
def test_text_that_is_not_utf8_is_a_store_corrupt_naming_run_and_event(tmp_path: Path, column: str) -> None:
    database = tmp_path / "runs.sqlite"
    store = EventStore(f"sqlite:///{database}")
    run_id = awaiting_run(store, "why")
    not_utf8(database, run_id, column)
    with pytest.raises(StoreCorrupt, match=rf"run {run_id}: event 4 cannot be read: its {column} is not UTF-8 text"):
        EventStore(f"sqlite:///{database}").state(run_id)


def test_runs_show_and_audit_verify_name_the_event_without_a_traceback(tmp_path: Path) -> None:
    database = tmp_path / "runs.sqlite"
    run_id = awaiting_run(EventStore(f"sqlite:///{database}"), "why")
    not_utf8(database, run_id)
    shown = groundstate(tmp_path, "runs", "show", run_id, "--db", f"sqlite:///{database}")
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert f"run {run_id}: event 4 cannot be read: its payload is not UTF-8 text" in shown.stdout
    verified = subprocess.run([sys.executable, "-m", "groundstate", "audit", "verify", "--db", f"sqlite:///{database}"],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    assert verified.returncode != 0, verified.stdout + verified.stderr
    assert f"{run_id}: event 4 was changed: its payload is not UTF-8 text" in verified.stdout + verified.stderr
    for done in (shown, verified):
        assert "Traceback" not in done.stdout + done.stderr and "sqlite3" not in done.stdout + done.stderr


def test_runs_pauses_lists_the_readable_runs_and_names_the_damaged_one(
    tmp_path: Path, two_paused: tuple[Path, str, str]
) -> None:
    database, damaged, intact = two_paused
    listed = groundstate(tmp_path, "runs", "pauses", "--db", f"sqlite:///{database}")
    assert listed.returncode == 2, listed.stdout + listed.stderr  # the damage is not silent
    assert f"{intact}  pause 5  writer_a  quality" in listed.stdout and "the intact run's reason" in listed.stdout
    assert damaged not in listed.stdout
    assert f"error: run {damaged}: event 4 cannot be read" in listed.stderr
    assert "Traceback" not in listed.stdout + listed.stderr


def test_the_console_inbox_and_the_api_list_the_readable_runs_and_name_the_damaged_one(
    tmp_path: Path, two_paused: tuple[Path, str, str]
) -> None:
    database, damaged, intact = two_paused
    with serving(tmp_path, "--db", f"sqlite:///{database}") as console, console.api() as api:
        home = api.get("/")
        assert home.status_code == 200, home.text
        assert f'data-run="{intact}"' in home.text and f'data-run="{damaged}"' not in home.text
        assert f"{damaged}</a> awaits a decision but cannot be read: run {damaged}: event 4" in home.text
        approvals = api.get("/api/approvals")
        assert approvals.status_code == 200, approvals.text
        assert [pause["run_id"] for pause in approvals.json()] == [intact]
        assert approvals.headers["Groundstate-Unreadable-Runs"] == damaged
        one = api.get(f"/api/runs/{damaged}")
        assert one.status_code == 500 and one.json()["code"] == "store_failed"
        assert f"run {damaged}: event 4 cannot be read" in one.json()["detail"]
