"""A run's log nobody can quietly edit: every event carries a hash chained to the one before it, and
``groundstate audit verify`` names the first event that was changed, removed, inserted or reordered by someone who
had the database file but not groundstate. Each edit is made with sqlite3 on a real run's store, as an attacker
would; the run itself was driven to completion by the runtime (a scripted model on loopback)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from groundstate.runtime import EventStore, Runtime, make_backend
from groundstate.runtime.chain import link

from ..console.conftest import serving
from .conftest import Script, envelope

KEY = "an operator's key, 32 characters"
FLOW = """
name: audited
agents:
  - id: writer_a
    instructions: Write one line.
"""


def finished_run(runtime: Runtime, script: Script) -> str:
    script.answers = {"writer_a": [envelope("One line. [STATUS: SUCCESS]")]}
    run_id = runtime.create(FLOW, "audited.yaml", "scripted")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    return run_id


def verify(store: Path, *arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "GROUNDSTATE_AUDIT_KEY"}
    return subprocess.run([sys.executable, "-m", "groundstate", "audit", "verify", "--db", f"sqlite:///{store}",
                           *arguments], capture_output=True, text=True, timeout=60,
                          env={**environment, **(env or {})})  # fmt: skip


def change(db: sqlite3.Connection, run: str) -> None:
    db.execute("UPDATE events SET payload = ? WHERE run_id = ? AND seq = 3", ('{"agent": "writer_b"}', run))


def remove(db: sqlite3.Connection, run: str) -> None:
    db.execute("DELETE FROM events WHERE run_id = ? AND seq = 3", (run,))


def insert(db: sqlite3.Connection, run: str) -> None:  # the later events renumbered to make room
    db.execute("UPDATE events SET seq = seq + 1000 WHERE run_id = ? AND seq >= 3", (run,))
    db.execute("UPDATE events SET seq = seq - 999 WHERE run_id = ? AND seq > 1000", (run,))
    db.execute("UPDATE runs SET last_seq = last_seq + 1 WHERE id = ?", (run,))
    db.execute("INSERT INTO events (run_id, seq, type, agent, payload, actor, at, chain) SELECT run_id, 3, type, "
               "agent, payload, 'operator:mallory', at, chain FROM events WHERE run_id = ? AND seq = 4", (run,))


def reorder(db: sqlite3.Connection, run: str) -> None:
    db.execute("UPDATE events SET seq = -1 WHERE run_id = ? AND seq = 3", (run,))
    db.execute("UPDATE events SET seq = 3 WHERE run_id = ? AND seq = 4", (run,))
    db.execute("UPDATE events SET seq = 4 WHERE run_id = ? AND seq = -1", (run,))


def truncate(db: sqlite3.Connection, run: str) -> None:
    last = db.execute("SELECT max(seq) FROM events WHERE run_id = ?", (run,)).fetchone()[0]
    db.execute("DELETE FROM events WHERE run_id = ? AND seq = ?", (run, last))


@pytest.mark.parametrize(("edit", "seq", "how"), [
    (change, 3, "changed"), (remove, 3, "removed"), (insert, 3, "inserted"), (reorder, 3, "reordered"),
    (truncate, None, "removed"),
])  # fmt: skip
def test_each_edit_outside_groundstate_is_named(
    edit: Callable[[sqlite3.Connection, str], None], seq: int | None, how: str, runtime: Runtime,
    model: tuple[str, Script], tmp_path: Path,
) -> None:  # fmt: skip
    run = finished_run(runtime, model[1])
    store = tmp_path / "gs.db"
    clean = verify(store, "--run", run)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith(f"{run}: verified ") and "head sha256:" in clean.stdout
    with sqlite3.connect(store) as db:
        last = db.execute("SELECT max(seq) FROM events WHERE run_id = ?", (run,)).fetchone()[0]
        edit(db, run)
    found = verify(store, "--run", run)
    assert found.returncode == 1 and "Traceback" not in found.stderr, found.stdout + found.stderr
    assert found.stdout.startswith(f"{run}: event {seq or last} was {how}: "), found.stdout


def test_every_run_is_verified_and_json_names_the_first_bad_event(
    runtime: Runtime, model: tuple[str, Script], tmp_path: Path
) -> None:
    first, second = finished_run(runtime, model[1]), finished_run(runtime, model[1])
    with sqlite3.connect(tmp_path / "gs.db") as db:
        change(db, second)
    found = verify(tmp_path / "gs.db", "--json")
    assert found.returncode == 1
    lines = [json.loads(line) for line in found.stdout.splitlines()]
    verdicts = {line["run"]: line for line in lines if "run" in line}
    assert [line["ok"] for line in lines if line.get("store")] == [True]  # the store's chain: its own line
    assert verdicts[first]["ok"] is True and verdicts[first]["events"] > 3
    assert (verdicts[second]["ok"], verdicts[second]["seq"], verdicts[second]["how"]) == (False, 3, "changed")


def test_a_log_written_before_chains_is_reported_not_refused(
    runtime: Runtime, model: tuple[str, Script], tmp_path: Path
) -> None:
    model[1].answers = {"writer_a": [envelope("One line. [STATUS: SUCCESS]")]}
    run = runtime.create(FLOW, "audited.yaml", "scripted")
    with sqlite3.connect(tmp_path / "gs.db") as db:  # as an older groundstate left it: no links, no head
        db.execute("UPDATE events SET chain = NULL WHERE run_id = ?", (run,))
        db.execute("UPDATE runs SET chain = NULL WHERE id = ?", (run,))
    found = verify(tmp_path / "gs.db", "--run", run)
    assert found.returncode == 0 and re.search(r"verified 0 events, head - \((\d+) earlier events were written "
                                               r"before chains\)", found.stdout), found.stdout  # fmt: skip
    assert asyncio.run(runtime.drive(run)).status == "completed"  # new events chain on from there
    found = verify(tmp_path / "gs.db", "--run", run)
    assert found.returncode == 0 and re.search(r"verified [1-9]\d* events, head sha256:\w+ \(\d+ earlier",
                                               found.stdout), found.stdout  # fmt: skip


def relink(db: sqlite3.Connection, run: str) -> None:
    """Every link of the run recomputed after an edit, as an attacker who read runtime/chain.py would."""
    head = ""
    rows = db.execute("SELECT id, type, agent, payload, actor, at FROM events WHERE run_id = ? ORDER BY seq",
                      (run,)).fetchall()  # fmt: skip
    for row_id, kind, agent, payload, actor, at in rows:
        moment = datetime.fromisoformat(at).replace(tzinfo=UTC)
        head = link(head, run, kind, agent, payload, actor, moment)
        db.execute("UPDATE events SET chain = ? WHERE id = ?", (head, row_id))
    db.execute("UPDATE runs SET chain = ? WHERE id = ?", (head, run))


def test_a_signed_head_catches_a_log_rewritten_whole(model: tuple[str, Script], tmp_path: Path) -> None:
    config = tmp_path / "groundstate.toml"
    config.write_text("[audit]\nsign = true\n")
    store = EventStore(f"sqlite:///{tmp_path / 'gs.db'}", audit_key=KEY.encode())  # as [audit] sign gives it
    runtime = Runtime(store, tmp_path, backend=make_backend(f"openai-chat:scripted@{model[0]}"))
    run = finished_run(runtime, model[1])
    keyed = {"GROUNDSTATE_AUDIT_KEY": KEY}
    clean = verify(tmp_path / "gs.db", "--run", run, "--config", str(config), env=keyed)
    assert clean.returncode == 0 and re.search(r"; signed \(event \d+, checked\)$", clean.stdout.strip()), clean.stdout
    with sqlite3.connect(tmp_path / "gs.db") as db:
        change(db, run)
        relink(db, run)
    unsigned = verify(tmp_path / "gs.db", "--run", run)  # the links alone are whole again
    assert unsigned.returncode == 0 and "signed, not checked: no key" in unsigned.stdout
    found = verify(tmp_path / "gs.db", "--run", run, "--config", str(config), env=keyed)
    assert found.returncode == 1 and "the run's signed head does not verify with the configured key" in found.stdout


def test_the_console_shows_whether_a_runs_log_verifies(
    runtime: Runtime, model: tuple[str, Script], tmp_path: Path
) -> None:
    run = finished_run(runtime, model[1])
    with sqlite3.connect(tmp_path / "gs.db") as db:
        (original,) = db.execute("SELECT payload FROM events WHERE run_id = ? AND seq = 3", (run,)).fetchone()
    with serving(tmp_path, "--db", f"sqlite:///{tmp_path / 'gs.db'}") as console:
        before = console.api().get(f"/runs/{run}").text
        with sqlite3.connect(tmp_path / "gs.db") as db:
            change(db, run)
        after = console.api().get(f"/runs/{run}").text
        with sqlite3.connect(tmp_path / "gs.db") as db:  # the event put back; the run's listed status changed
            db.execute("UPDATE events SET payload = ? WHERE run_id = ? AND seq = 3", (original, run))
            db.execute("UPDATE runs SET status = 'failed' WHERE id = ?", (run,))
        relisted = console.api().get(f"/runs/{run}").text
    assert re.search(r'class="audit verified">Log verified: \d+ events chained; unsigned', before), before
    assert ('class="audit broken">Log edited outside groundstate: event 3 was changed — its content is not what its '
            "link was computed from") in after  # fmt: skip
    assert ('class="audit broken">Log edited outside groundstate: the runs table lists it as failed with 0 open '
            "pauses; its log says completed with 0") in relisted, relisted  # fmt: skip


# -- found by an attack helper: each stays a test --------------------------------------------------------------------
def signed_run(model: tuple[str, Script], tmp_path: Path) -> tuple[str, Path]:
    config = tmp_path / "groundstate.toml"
    config.write_text("[audit]\nsign = true\n")
    store = EventStore(f"sqlite:///{tmp_path / 'gs.db'}", audit_key=KEY.encode())
    runtime = Runtime(store, tmp_path, backend=make_backend(f"openai-chat:scripted@{model[0]}"))
    return finished_run(runtime, model[1]), config


def test_with_signing_on_a_log_whose_links_and_signature_were_removed_fails(
    model: tuple[str, Script], tmp_path: Path
) -> None:
    run, config = signed_run(model, tmp_path)
    with sqlite3.connect(tmp_path / "gs.db") as db:
        change(db, run)
        db.execute("UPDATE events SET chain = NULL WHERE run_id = ?", (run,))
        db.execute("UPDATE runs SET chain = NULL, chain_signature = NULL WHERE id = ?", (run,))
    found = verify(tmp_path / "gs.db", "--run", run, "--config", str(config), env={"GROUNDSTATE_AUDIT_KEY": KEY})
    assert found.returncode == 1 and found.stdout.startswith(f"{run}: not verified: "), found.stdout
    assert "carry no link though [audit] sign is on" in found.stdout
    with sqlite3.connect(tmp_path / "gs.db") as db:
        relink(db, run)  # the links recomputed, the signature still gone
    found = verify(tmp_path / "gs.db", "--run", run, "--config", str(config), env={"GROUNDSTATE_AUDIT_KEY": KEY})
    assert found.returncode == 1 and "carries no signature though [audit] sign is on" in found.stdout, found.stdout


@pytest.mark.parametrize("statement", [
    "UPDATE runs SET chain_signature = 'garbage' WHERE id = ?",
    "UPDATE runs SET chain_signature = 'abc:def' WHERE id = ?",
    "UPDATE events SET at = 'yesterday' WHERE run_id = ? AND seq = 2",
    "UPDATE events SET payload = CAST(payload AS BLOB) WHERE run_id = ? AND seq = 2",
])  # fmt: skip
def test_values_groundstate_never_writes_in_a_run_are_named_never_a_traceback(
    statement: str, model: tuple[str, Script], tmp_path: Path
) -> None:
    run, config = signed_run(model, tmp_path)
    with sqlite3.connect(tmp_path / "gs.db") as db:
        db.execute(statement, (run,))
    found = verify(tmp_path / "gs.db", "--run", run, "--config", str(config), env={"GROUNDSTATE_AUDIT_KEY": KEY})
    assert found.returncode == 1 and "Traceback" not in found.stdout + found.stderr, found.stdout + found.stderr
    assert found.stdout.startswith(f"{run}: "), found.stdout


def test_a_run_whose_row_was_removed_is_named(runtime: Runtime, model: tuple[str, Script], tmp_path: Path) -> None:
    run = finished_run(runtime, model[1])
    with sqlite3.connect(tmp_path / "gs.db") as db:
        db.execute("PRAGMA foreign_keys = OFF")
        db.execute("DELETE FROM runs WHERE id = ?", (run,))
    found = verify(tmp_path / "gs.db")
    assert found.returncode == 1 and f"{run}: the run was removed: its events remain" in found.stdout, found.stdout
