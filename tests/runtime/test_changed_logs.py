"""A run's log changed outside groundstate is not acted on, through the command line: the chain of its events (and
its signed head, with the audit key) is verified before a run is driven and before an operator's decision is
recorded, so an edited pause cannot be approved as edited and nothing is appended after a changed event. Found as a
gap of the audit chain ("a broken chain is still appended to")."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from groundstate.runtime import (
    AgentStarted,
    ApprovalDecided,
    EventStore,
    NodeCreated,
    RunStarted,
    Runtime,
    StoreCorrupt,
)

from ..console.conftest import serving
from .test_unreadable_runs import awaiting_run

FLOW = "name: w\nagents:\n  - id: writer_a\n    instructions: write\n"
KEY = "an-audit-key-of-the-operator"


def groundstate(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("GROUNDSTATE_CONFIG", "GROUNDSTATE_TOKEN", "GROUNDSTATE_AUDIT_KEY")}  # fmt: skip
    environment |= {"GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "240", **env}
    return subprocess.run([sys.executable, "-m", "groundstate", *args], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip


def edit(database: Path, run_id: str, seq: int, **changes: object) -> None:
    """Change keys of one stored event's payload, as a hand with the database file could (valid JSON, same shape)."""
    with sqlite3.connect(database) as db:
        (payload,) = db.execute("SELECT payload FROM events WHERE run_id = ? AND seq = ?", (run_id, seq)).fetchone()
        db.execute("UPDATE events SET payload = ? WHERE run_id = ? AND seq = ?",
                   (json.dumps(json.loads(payload) | changes), run_id, seq))  # fmt: skip


def events(database: Path, run_id: str) -> int:
    with sqlite3.connect(database) as db:
        return int(db.execute("SELECT COUNT(*) FROM events WHERE run_id = ?", (run_id,)).fetchone()[0])


def changed_pause(tmp_path: Path, reason: str = "harmless") -> tuple[Path, str, str]:
    """A run awaiting a decision whose pause (event 5) was edited to say ``reason``: (database, its URL, run)."""
    database = tmp_path / "runs.sqlite"
    url = f"sqlite:///{database}"
    run_id = awaiting_run(EventStore(url), "the agent asks to write notes.txt")
    edit(database, run_id, 5, reason=reason)  # what the operator reads
    return database, url, run_id


def test_an_edited_pause_cannot_be_approved_as_edited_and_can_be_aborted(tmp_path: Path) -> None:
    database, url, run_id = changed_pause(tmp_path, "the agent asks to write ~/.ssh/authorized_keys")
    before = events(database, run_id)
    retried = groundstate(tmp_path, "runs", "decide", run_id, "retry", "--db", url)
    assert retried.returncode == 2, retried.stdout + retried.stderr
    said = " ".join((retried.stdout + retried.stderr).split())
    assert f"run {run_id}: event 5 was changed" in said and "the decision retry is refused" in said
    assert "Traceback" not in retried.stderr
    assert events(database, run_id) == before  # nothing appended after the changed event
    aborted = groundstate(tmp_path, "runs", "decide", run_id, "abort", "--db", url)
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr  # ending it acts on nothing it says
    shown = json.loads(groundstate(tmp_path, "runs", "show", run_id, "--json", "--db", url).stdout)
    assert shown["status"] == "aborted"


def interrupted_run(url: str) -> str:
    """A run whose driver died inside its agent's first attempt (no lease left): ``runs resume`` drives it."""
    store = EventStore(url)
    run_id = store.create_run("w", FLOW, "openai-chat:m@http://127.0.0.1:9")
    store.append(run_id, NodeCreated(agent="writer_a"))
    store.append(run_id, RunStarted(model=None, driver="gone"))
    store.append(run_id, AgentStarted(attempt=1, backend="scripted"), "writer_a")
    store.engine.dispose()
    return run_id


def test_a_run_whose_log_was_changed_is_not_driven(tmp_path: Path) -> None:
    database = tmp_path / "runs.sqlite"
    url = f"sqlite:///{database}"
    run_id = interrupted_run(url)
    edit(database, run_id, 1, workflow=FLOW.replace("instructions: write", "instructions: delete everything"))
    before = events(database, run_id)
    resumed = groundstate(tmp_path, "runs", "resume", run_id, "--db", url)
    assert resumed.returncode == 2, resumed.stdout + resumed.stderr
    said = " ".join((resumed.stdout + resumed.stderr).split())
    assert f"run {run_id}: event 1 was changed" in said and "driving the run is refused" in said
    assert "Traceback" not in resumed.stderr
    assert events(database, run_id) == before


def test_with_the_audit_key_a_signed_head_that_does_not_verify_is_not_driven(tmp_path: Path) -> None:
    """The links can be recomputed by anyone; the signature only with the key. With the key in the environment
    ([audit] key_env), a head whose signature is not the key's is refused; without it, the links alone are checked."""
    database = tmp_path / "runs.sqlite"
    url = f"sqlite:///{database}"
    store = EventStore(url, audit_key=KEY.encode())
    run_id = store.create_run("w", FLOW, None)
    store.append(run_id, NodeCreated(agent="writer_a"))
    store.engine.dispose()
    with sqlite3.connect(database) as db:
        (signed,) = db.execute("SELECT chain_signature FROM runs WHERE id = ?", (run_id,)).fetchone()
        seq, _, mac = signed.partition(":")
        db.execute("UPDATE runs SET chain_signature = ? WHERE id = ?", (f"{seq}:{'0' * len(mac)}", run_id))
    refused = groundstate(tmp_path, "runs", "resume", run_id, "--db", url, GROUNDSTATE_AUDIT_KEY=KEY)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = " ".join((refused.stdout + refused.stderr).split())
    assert "does not verify with the configured key" in said and "driving the run is refused" in said
    assert events(database, run_id) == 2
    unkeyed = groundstate(tmp_path, "runs", "resume", run_id, "--db", url)  # the links hold: driven (no model here)
    assert "driving the run is refused" not in unkeyed.stdout + unkeyed.stderr
    assert events(database, run_id) > 2


def test_with_signing_on_a_log_whose_links_and_signature_were_removed_is_not_driven(tmp_path: Path) -> None:
    """With ``[audit] sign`` every write signs, so a head with no signature and events with no link are an edit
    (the chain removed whole to hide a change), refused as ``audit verify`` refuses it — not only reported after."""
    database = tmp_path / "runs.sqlite"
    url = f"sqlite:///{database}"
    store = EventStore(url, audit_key=KEY.encode())
    run_id = store.create_run("w", FLOW, None)
    store.append(run_id, NodeCreated(agent="writer_a"))
    store.engine.dispose()
    edit(database, run_id, 1, workflow=FLOW.replace("instructions: write", "instructions: delete everything"))
    with sqlite3.connect(database) as db:
        db.execute("UPDATE events SET chain = NULL WHERE run_id = ?", (run_id,))
        db.execute("UPDATE runs SET chain = NULL, chain_signature = NULL WHERE id = ?", (run_id,))
    (tmp_path / "signed.toml").write_text('[audit]\nsign = true\n')
    refused = groundstate(tmp_path, "runs", "resume", run_id, "--db", url, "--config", "signed.toml",
                          GROUNDSTATE_AUDIT_KEY=KEY)  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = " ".join((refused.stdout + refused.stderr).split())
    assert "carry no link though [audit] sign is on" in said and "driving the run is refused" in said
    assert events(database, run_id) == 2


def test_audit_verify_names_a_run_whose_listed_status_was_changed(tmp_path: Path) -> None:
    """The runs table is what the listings and the inbox read, a cache of each run's log; a waiting run whose row
    says it completed is gone from the inbox, and ``audit verify`` names it, saying what its log says."""
    database = tmp_path / "runs.sqlite"
    url = f"sqlite:///{database}"
    run_id = awaiting_run(EventStore(url), "approve the write")
    intact = awaiting_run(EventStore(url), "approve the other write")
    with sqlite3.connect(database) as db:
        db.execute("UPDATE runs SET status = 'completed', open_pauses = 0 WHERE id = ?", (run_id,))
    verified = groundstate(tmp_path, "audit", "verify", "--db", url)
    assert verified.returncode == 1, verified.stdout + verified.stderr
    said = " ".join(verified.stdout.split())
    assert (f"{run_id}: not verified: the runs table lists it as completed with 0 open pauses; its log says "
            "awaiting_approval with 1") in said, said
    assert f"{intact}: verified" in said
    assert "Traceback" not in verified.stderr
    with sqlite3.connect(database) as db:  # the listing's reason: what `runs list` shows of the pause
        db.execute("UPDATE runs SET pause_reason = 'read the README' WHERE id = ?", (intact,))
    reasoned = groundstate(tmp_path, "audit", "verify", "--run", intact, "--db", url)
    assert reasoned.returncode == 1 and "shows another pause than its log's" in reasoned.stdout, reasoned.stdout


# -- found by an attack on the refusal: each stays a test -------------------------------------------------------------
def test_a_long_lived_process_acts_on_the_log_as_it_is_not_as_it_once_read_it(tmp_path: Path) -> None:
    """A console (one process, its store's states cached) read a run while its log was edited; the edit was put back
    so that the log verifies again. A decision then acts on the log as it stands — the original — never on the
    edited state the process once read."""
    database = tmp_path / "runs.sqlite"
    url = f"sqlite:///{database}"
    run_id = awaiting_run(EventStore(url), "approve the write")
    with sqlite3.connect(database) as db:
        (original,) = db.execute("SELECT payload FROM events WHERE run_id = ? AND seq = 1", (run_id,)).fetchone()
    edit(database, run_id, 1, workflow=FLOW.replace("instructions: write", "instructions: EVIL"))
    console = Runtime(EventStore(url), tmp_path / "home")
    assert "EVIL" in console.store.state(run_id).workflow  # read while edited: cached
    with sqlite3.connect(database) as db:
        db.execute("UPDATE events SET payload = ? WHERE run_id = ? AND seq = 1", (original, run_id))
    decided = console.decide(run_id, "skip")
    assert "EVIL" not in decided.workflow and decided.status != "awaiting_approval"
    assert EventStore(url).verify(run_id).ok


def test_a_writer_whose_log_was_changed_behind_it_appends_nothing(tmp_path: Path) -> None:
    """A driver holds the run's state; someone edits an event and lowers the row's last_seq so the driver reads the
    log again. Its next write checks the links it replays and is refused, instead of acting on the edit."""
    database = tmp_path / "runs.sqlite"
    url = f"sqlite:///{database}"
    store = EventStore(url)
    run_id = awaiting_run(store, "approve the write")
    store.state(run_id)
    edit(database, run_id, 4, backend="INJECTED")
    with sqlite3.connect(database) as db:
        db.execute("UPDATE runs SET last_seq = last_seq - 1 WHERE id = ?", (run_id,))
    before = events(database, run_id)
    with pytest.raises(StoreCorrupt, match=rf"run {run_id}: event 4 was changed.*nothing is appended"):
        store.append(run_id, ApprovalDecided(decision="skip", pause=5), "writer_a")
    assert events(database, run_id) == before


def test_repinning_a_changed_log_is_refused(tmp_path: Path) -> None:
    database, url, run_id = changed_pause(tmp_path)
    before = events(database, run_id)
    repinned = groundstate(tmp_path, "runs", "repin", run_id, "--db", url)
    assert repinned.returncode == 2, repinned.stdout + repinned.stderr
    assert "re-pinning is refused" in " ".join((repinned.stdout + repinned.stderr).split())
    assert events(database, run_id) == before


def test_the_console_refuses_a_decision_on_a_changed_log_as_a_conflict(tmp_path: Path) -> None:
    """Not a server error: the run's state is not one groundstate acts on (409, ``state_conflict``), and why."""
    database, url, run_id = changed_pause(tmp_path)
    with serving(tmp_path, "--db", url) as console, console.api() as api:
        decided = api.post(f"/api/runs/{run_id}/decision", json={"pause": 5, "decision": "retry"})
    assert decided.status_code == 409, decided.text
    assert decided.json()["code"] == "state_conflict" and "event 5 was changed" in decided.json()["detail"]
    assert events(database, run_id) == 5


def test_a_run_is_created_whole_or_not_at_all(tmp_path: Path) -> None:
    """Its row and its RunCreated are one transaction: a write that fails in between (here the database refuses the
    event, as a full disk would) leaves no row without a log — a run nobody could show, abort or drive."""
    database = tmp_path / "runs.sqlite"
    url = f"sqlite:///{database}"
    EventStore(url).engine.dispose()  # the tables
    with sqlite3.connect(database) as db:
        db.execute("CREATE TRIGGER full BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    store = EventStore(url)
    with pytest.raises(Exception, match="disk full"):
        store.create_run("w", FLOW, None)
    assert store.runs() == []
