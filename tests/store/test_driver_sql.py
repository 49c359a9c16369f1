"""The tool journal's and the guard ledger's per-call statements run as the driver's own SQL (``DriverSQL``): what
they write reads back through the expression layer exactly as before — timestamps aware and in their column's
format, ids from the insert itself — on SQLite and on PostgreSQL."""

from __future__ import annotations

import re
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from groundstate.guard import Ledger
from groundstate.store import CallInDoubt, ToolJournal, hot_transaction, reading

from ..postgres import postgres  # noqa: F401 (the PostgreSQL fixture)


def test_a_journaled_call_reads_back_with_its_moments(store_url: str) -> None:
    journal, scope = ToolJournal(store_url), f"mcp:{uuid.uuid4().hex}/"
    before = datetime.now(UTC) - timedelta(seconds=1)
    assert journal.begin(scope, 3, "git_commit", {"message": "m"}) is None
    [entry] = journal.entries(scope)
    assert (entry.position, entry.tool, entry.arguments, entry.state) == (3, "git_commit", '{"message": "m"}', "intent")
    assert before <= entry.started_at <= datetime.now(UTC) and entry.started_at.tzinfo is not None
    with pytest.raises(CallInDoubt, match=f"at {entry.started_at:%H:%M:%S} UTC"):
        journal.begin(scope, 3, "git_commit", {"message": "m"})
    assert journal.resolve(scope, "operator:ana", "approved") == 1
    assert journal.begin(scope, 3, "git_commit", {"message": "m"}) is None  # journaled again: an intent once more
    journal.finish(scope, 3, "git_commit", {"message": "m"}, {"ok": True, "output": "é"})
    [entry] = journal.entries(scope)
    assert entry.state == "done" and entry.result == {"ok": True, "output": "é"}
    assert journal.begin(scope, 3, "git_commit", {"message": "m"}) == {"ok": True, "output": "é"}


def test_a_ledger_row_reads_back_with_its_id_and_moments(store_url: str) -> None:
    ledger = Ledger(store_url)
    verdict = SimpleNamespace(decision="approve", call="c1", digest="sha256:ab", reasons=["needs an operator"],
                              why="a derivation")  # fmt: skip
    first = ledger.record("git", "git_commit", {"message": "m"}, "a client over stdio", verdict, 300)
    second = ledger.record("git", "git_status", {}, "a client over stdio", SimpleNamespace(**{**verdict.__dict__,
                           "decision": "permit"}), 300)  # fmt: skip
    assert second > first
    held, permitted = ledger.get(first), ledger.get(second)
    assert held is not None and permitted is not None
    assert (held.status, held.arguments, held.reasons, held.why) == ("held", {"message": "m"}, ["needs an operator"],
                                                                     "a derivation")  # fmt: skip
    assert held.at.tzinfo is not None and abs((datetime.now(UTC) - held.at).total_seconds()) < 60
    assert held.expires_at is not None and abs((held.expires_at - held.at).total_seconds() - 300) < 0.001
    assert (permitted.status, permitted.expires_at) == ("permit", None)
    assert [entry.id for entry in ledger.entries(status="held")] == [first]


def test_on_sqlite_the_moments_are_stored_in_the_expression_layers_format(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gs.db'}"
    ToolJournal(url).begin("mcp:x/", 1, "t", {})
    Ledger(url).record("s", "t", {}, "c", SimpleNamespace(decision="approve", call=None, digest="d", reasons=[],
                                                          why=""), 5)  # fmt: skip
    with sqlite3.connect(tmp_path / "gs.db") as db:
        stored = [*db.execute("SELECT started_at FROM tool_journal"), *db.execute("SELECT at, expires_at FROM "
                                                                                   "mcp_decisions")]  # fmt: skip
    moments = [value for row in stored for value in row]
    assert len(moments) == 3 and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", m) for m in moments)


def test_a_reader_with_its_snapshot_open_never_holds_up_a_writer(tmp_path: Path) -> None:
    """A console polling the runs, a ``status``: reads begin deferred on SQLite (``store.reading``), so a writer in
    another process does not wait for them — before, every read took the write lock for its transaction."""
    url = f"sqlite:///{tmp_path / 'gs.db'}"
    journal = ToolJournal(url)
    journal.begin("mcp:x/", 1, "t", {})
    with reading(journal.engine) as db:
        assert db.exec_driver_sql("SELECT count(*) FROM tool_journal").scalar_one() == 1  # the snapshot is taken
        other = sqlite3.connect(tmp_path / "gs.db", timeout=0.2, isolation_level=None)  # another process's writer
        other.execute("BEGIN IMMEDIATE")  # would fail with "database is locked" while the reader held the lock
        other.execute("UPDATE tool_journal SET state = 'done'")
        other.execute("COMMIT")
        other.close()
        assert db.exec_driver_sql("SELECT state FROM tool_journal").scalar_one() == "intent"  # its own snapshot
    assert [e.state for e in journal.entries("mcp:x/")] == ["done"]


def test_a_hot_transaction_that_fails_writes_nothing(store_url: str) -> None:
    journal, scope = ToolJournal(store_url), f"mcp:{uuid.uuid4().hex}/"
    with pytest.raises(RuntimeError, match="after the intent"), hot_transaction(journal.engine) as db:
        journal.begin(scope, 1, "git_commit", {"message": "m"}, db=db)
        raise RuntimeError("after the intent, before the commit")
    assert journal.entries(scope) == []
    with hot_transaction(journal.engine) as db:
        journal.begin(scope, 1, "git_commit", {"message": "m"}, db=db)
    assert [entry.state for entry in journal.entries(scope)] == ["intent"]
