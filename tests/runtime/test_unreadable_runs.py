"""A store changed outside groundstate, through the public surface: bytes that are not UTF-8 in an event's text
columns are a StoreCorrupt naming the run and the event (never the SQLite driver's traceback), and one damaged run
awaiting a decision is listed apart — the other runs' pauses stay in the inbox of the CLI, the console and its API.
Both were found by an attack on the typed event log."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from groundstate.guard import Ledger, McpPolicy
from groundstate.runtime import AgentStarted, ApprovalRequested, EventStore, NodeCreated, RunStarted, StoreCorrupt
from groundstate.store import ToolJournal

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


def rename_run(database: Path, run_id: str, new_id: str) -> None:
    """Give a run another id in its row and its events, as a hand with the database file could."""
    with sqlite3.connect(database) as db:
        db.execute("PRAGMA foreign_keys = OFF")
        for table, column in (("runs", "id"), ("events", "run_id")):
            db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (new_id, run_id))


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


# -- found by an attack on the above: damage outside the events table -------------------------------------------

DAMAGED_ROWS = {
    "a run's text not UTF-8": "UPDATE runs SET pause_reason = {X} WHERE id = '{run}'",
    "a run's date not a date": "UPDATE runs SET created_at = 'garbage' WHERE id = '{run}'",
    "a run's date a number": "UPDATE runs SET updated_at = 42 WHERE id = '{run}'",
    "a run's count not a number": "UPDATE runs SET open_pauses = 'x' WHERE id = '{run}'",
    "a run's status none a run has": "UPDATE runs SET status = 'exploded' WHERE id = '{run}'",
    "a lease not UTF-8": "INSERT INTO run_leases VALUES ('{run}', {X}, '2030-01-01 00:00:00')",
    "a lease's date not a date": "INSERT INTO run_leases VALUES ('{run}', 'h', 'garbage')",
}


def damage(database: Path, statement: str, run_id: str) -> None:
    with sqlite3.connect(database) as db:
        db.execute(statement.format(X=NOT_UTF8, run=run_id))


@pytest.mark.parametrize("statement", DAMAGED_ROWS.values(), ids=DAMAGED_ROWS.keys())
def test_a_damaged_run_row_is_listed_apart_by_runs_list_and_runs_pauses(tmp_path: Path, statement: str) -> None:
    database = tmp_path / "runs.sqlite"
    store = EventStore(f"sqlite:///{database}")
    damaged, intact = awaiting_run(store, "the damaged run's reason"), awaiting_run(store, "the intact run's reason")
    store.engine.dispose()
    damage(database, statement, damaged)
    url = f"sqlite:///{database}"
    listed = groundstate(tmp_path, "runs", "list", "--db", url)
    assert listed.returncode == 2, listed.stdout + listed.stderr
    assert f"{intact}  w  awaiting_approval" in listed.stdout
    assert f"{damaged}  unreadable: run {damaged}: its row cannot be read" in listed.stdout
    pauses = groundstate(tmp_path, "runs", "pauses", "--db", url)
    assert pauses.returncode == 2 and "the intact run's reason" in pauses.stdout, pauses.stdout + pauses.stderr
    assert f"error: run {damaged}: its row cannot be read" in pauses.stderr
    verified = groundstate(tmp_path, "audit", "verify", "--db", url)
    assert verified.returncode == 1 and f"{intact}: verified 5 events" in verified.stdout, verified.stdout
    assert f"{damaged}: not verified: run {damaged}: its row cannot be read" in verified.stdout
    for done in (listed, pauses, verified):
        assert "Traceback" not in done.stdout + done.stderr


def test_a_log_cut_short_is_corrupt_not_an_earlier_state(tmp_path: Path) -> None:
    """Events removed from the end of a log (its row still says how many were written) replayed to the state
    before them: a run awaiting approval vanished from the inbox with exit 0."""
    database = tmp_path / "runs.sqlite"
    run_id = awaiting_run(EventStore(f"sqlite:///{database}"), "why")
    with sqlite3.connect(database) as db:
        db.execute("DELETE FROM events WHERE run_id = ? AND seq = 5", (run_id,))
    with pytest.raises(StoreCorrupt, match=rf"run {run_id}: event 5 is missing from the log \(its last event is 4"):
        EventStore(f"sqlite:///{database}").state(run_id)
    pauses = groundstate(tmp_path, "runs", "pauses", "--db", f"sqlite:///{database}")
    assert pauses.returncode == 2 and f"run {run_id}: event 5 is missing" in pauses.stderr


def test_terminal_control_in_a_run_id_is_shown_not_obeyed(tmp_path: Path) -> None:
    database = tmp_path / "runs.sqlite"
    run_id = awaiting_run(EventStore(f"sqlite:///{database}"), "why")
    hostile = "run-x\x1b[2J\x1b]0;PWNED\x07\rFAKE"
    rename_run(database, run_id, hostile)
    not_utf8(database, hostile)
    for command in (("runs", "list"), ("runs", "pauses"), ("audit", "verify")):
        done = groundstate(tmp_path, *command, "--db", f"sqlite:///{database}")
        printed = done.stdout + done.stderr
        assert "run-x\\u001b[2J\\u001b]0;PWNED\\u0007\\u000dFAKE" in printed, (command, printed)
        assert not any(ch in printed for ch in "\x1b\x07\r"), command


def test_a_webhook_outbox_row_that_cannot_be_read_stops_no_command(tmp_path: Path) -> None:
    """Every command builds a runtime, which queues the outbox's pending notifications: one damaged row made
    `runs list`, `runs show`, `audit verify` and `serve` fail."""
    database = tmp_path / "runs.sqlite"
    run_id = awaiting_run(EventStore(f"sqlite:///{database}"), "why")
    hook = "http://127.0.0.1:9/hook"
    (tmp_path / "notify.toml").write_text(f'[notify]\nwebhook = "{hook}"\n')
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE IF NOT EXISTS notification_outbox (id INTEGER PRIMARY KEY, delivery VARCHAR(64) "
                   "UNIQUE NOT NULL, kind VARCHAR(20) NOT NULL, url TEXT NOT NULL, body TEXT NOT NULL, created_at "
                   "DATETIME NOT NULL, status VARCHAR(20) NOT NULL, claimed_until DATETIME, attempts INTEGER NOT "
                   "NULL, last_error TEXT)")  # fmt: skip
        for number, body in enumerate((NOT_UTF8, "x'7b7d'")):
            db.execute(f"INSERT INTO notification_outbox (delivery, kind, url, body, created_at, status, attempts) "
                       f"VALUES ('d{number}', 'paused', ?, {body}, '2026-01-01 00:00:00', 'pending', 0)", (hook,))
    env = {"GROUNDSTATE_WEBHOOK_SECRET": "s" * 32}
    done = subprocess.run([sys.executable, "-m", "groundstate", "runs", "show", run_id, "--db",
                           f"sqlite:///{database}", "--config", str(tmp_path / "notify.toml")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, **env, "GROUNDSTATE_HOME": str(tmp_path / "home")})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr  # shown
    assert "cannot be read" in done.stderr and "Traceback" not in done.stdout + done.stderr


def test_the_console_survives_a_damaged_account_row_and_a_long_hostile_id(tmp_path: Path) -> None:
    database = tmp_path / "runs.sqlite"
    store = EventStore(f"sqlite:///{database}")
    intact = awaiting_run(store, "the intact run's reason")
    damaged = awaiting_run(store, "the damaged run's reason")
    store.engine.dispose()
    long_id = "../" + "Z" * 5000 + "?x#y"
    rename_run(database, damaged, long_id)
    not_utf8(database, long_id)
    with serving(tmp_path, "--db", f"sqlite:///{database}") as console, console.api() as api:
        approvals = api.get("/api/approvals")
        assert approvals.status_code == 200 and [p["run_id"] for p in approvals.json()] == [intact]
        header = approvals.headers["Groundstate-Unreadable-Runs"]
        assert len(header) <= 4000 and header == "+1 more"  # one id longer than a header line may be
        home = api.get("/")
        assert home.status_code == 200
        assert 'href="/runs/..%2FZZZ' in home.text and 'href="/runs/../' not in home.text  # one path segment
        token = console.account("dana", "operator")
        with sqlite3.connect(database) as db:
            db.execute(f"UPDATE operators SET token_set_at = {NOT_UTF8} WHERE name = 'dana'")
        with console.api(token) as dana:
            refused = dana.get("/api/runs")
        assert refused.status_code == 500 and refused.json()["code"] == "store_failed", refused.text
        assert "cannot be read" in refused.json()["detail"]


def test_one_unreadable_ledger_entry_hides_no_other(tmp_path: Path) -> None:
    """Found by an attack: one held call's row that could not be read (arguments not JSON, a date that is no date,
    bytes that are not UTF-8) made `approvals list` a traceback or an error hiding every held call."""
    database = tmp_path / "runs.sqlite"
    ledger = Ledger(f"sqlite:///{database}")
    verdict = McpPolicy().decide("git", "git_add", {"files": ["a"]}, "test")
    damaged = ledger.record("git", "git_add", {"files": ["a"]}, "test", verdict, hold_seconds=300)
    intact = ledger.record("git", "git_add", {"files": ["a"]}, "test", verdict, hold_seconds=300)
    for entry in (damaged, intact):
        ledger.park(entry)
    url = f"sqlite:///{database}"
    for damage_sql in ("arguments = 'not json'", "at = 'garbage'", f"client = {NOT_UTF8}"):
        with sqlite3.connect(database) as db:
            db.execute(f"UPDATE mcp_decisions SET {damage_sql} WHERE id = ?", (damaged,))
        every = groundstate(tmp_path, "approvals", "list", "--all", "--db", url)
        assert every.returncode == 0 and "Traceback" not in every.stderr, every.stdout + every.stderr
        listed = {row["id"]: row for row in map(json.loads, every.stdout.splitlines())}
        assert listed[intact]["status"] == "held" and listed[damaged]["status"] == "unreadable", damage_sql
        assert "cannot be read" in listed[damaged]["why"]
        held = groundstate(tmp_path, "approvals", "list", "--db", url)
        assert [json.loads(line)["id"] for line in held.stdout.splitlines()] == [intact], damage_sql


def test_audit_verify_names_a_changed_event_beside_a_store_row_it_cannot_read(tmp_path: Path) -> None:
    """Found by an attack: one tool-journal row that was not UTF-8 made `audit verify` an error naming only that
    row, and the run whose event was changed went unnamed."""
    database = tmp_path / "runs.sqlite"
    run_id = awaiting_run(EventStore(f"sqlite:///{database}"), "why")
    ToolJournal(f"sqlite:///{database}").begin(f"run:{run_id}/writer_a/1", 1, "read_file", {"path": "a"})
    with sqlite3.connect(database) as db:
        db.execute(f"UPDATE tool_journal SET arguments = {NOT_UTF8}")
        db.execute("UPDATE events SET payload = '{\"attempt\": 7}' WHERE run_id = ? AND seq = 4", (run_id,))
    verified = groundstate(tmp_path, "audit", "verify", "--db", f"sqlite:///{database}")
    assert verified.returncode == 1 and "Traceback" not in verified.stderr, verified.stdout + verified.stderr
    assert f"{run_id}: event 4 was changed" in verified.stdout
    assert "store: a row of tool_journal was changed: it cannot be read" in verified.stdout


def test_a_decision_is_not_reported_failed_when_the_journal_row_it_clears_cannot_be_read(tmp_path: Path) -> None:
    database = tmp_path / "runs.sqlite"
    run_id = awaiting_run(EventStore(f"sqlite:///{database}"), "why")
    ToolJournal(f"sqlite:///{database}").begin(f"run:{run_id}/writer_a/1", 1, "read_file", {"path": "a"})
    with sqlite3.connect(database) as db:
        db.execute(f"UPDATE tool_journal SET tool = {NOT_UTF8}")
    decided = groundstate(tmp_path, "runs", "decide", run_id, "skip", "--db", f"sqlite:///{database}")
    assert decided.returncode == 0, decided.stdout + decided.stderr
    assert "skip recorded" in decided.stdout and "calls in doubt could not be marked as seen" in decided.stderr
    assert EventStore(f"sqlite:///{database}").state(run_id).status == "running"


def test_an_unreadable_rows_id_cannot_forge_a_line_of_runs_list(tmp_path: Path) -> None:
    database = tmp_path / "runs.sqlite"
    run_id = awaiting_run(EventStore(f"sqlite:///{database}"), "why")
    forged = "run-a\nrun-b  w  completed"
    rename_run(database, run_id, forged)
    with sqlite3.connect(database) as db:
        db.execute("UPDATE runs SET status = 'exploded'")  # read, but no status a run has: its real id kept
    listed = groundstate(tmp_path, "runs", "list", "--db", f"sqlite:///{database}")
    assert listed.returncode == 2 and listed.stdout.count("\n") == 1, listed.stdout
    assert listed.stdout.startswith("run-a\\u000arun-b  w  completed  unreadable: ")
