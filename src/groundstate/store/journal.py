"""The tool journal: every effect the runtime or the MCP guard carries out is written down before it runs (its
intent) and after (its result), in the store's database, so that a process that dies never makes an effect happen
twice without an operator's say.

- A call whose result is journaled is not run again when its run resumes: the same call at the same place (scope,
  position, digest of the exact call) gets the recorded result back.
- A call with an intent and no result was in flight when its process died: it may or may not have taken effect.
  It is *in doubt*; ``begin`` refuses it (``CallInDoubt``) and the caller turns it into a pause. An operator's
  decision resolves it (``resolve``): from then on, the call may run again.

Scopes name where a call happened: ``run:RUN/AGENT/EPOCH`` for a workflow agent's calls (the epoch changes when the
operator retries the agent, not when a crashed driver is resumed), ``mcp:KEY`` for the guard's.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    select,
    update,
)
from sqlalchemy.engine import Engine

from ..errors import ConflictError
from .audit import JOURNAL, StoreChain
from .database import DriverSQL, Executes, aware, create_tables, hot_transaction, open_engine, reading, within
from .holders import alive, this_process

INTENT, DONE, RESOLVED = "intent", "done", "resolved"

_TABLES = MetaData()
entries = Table(
    "tool_journal", _TABLES,
    Column("scope", String(400), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("digest", String(80), primary_key=True),
    Column("tool", String(200), nullable=False),
    Column("arguments", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("result", Text),  # JSON, once done
    Column("holder", String(200), nullable=False),  # host:pid:start of the process that ran it (holders.py)
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    Column("resolution", Text),  # who resolved an in-doubt call, and how
    Index("tool_journal_by_state", "state", "digest"),  # calls in doubt, found without reading every finished one
)  # fmt: skip


class CallInDoubt(ConflictError):
    """A call was in flight when its process died (an intent without a result): it may or may not have taken
    effect, and it is not run again until an operator decides."""


@dataclass(frozen=True)
class JournalEntry:
    """One journaled call."""

    scope: str
    position: int
    digest: str
    tool: str
    arguments: str
    state: str
    result: dict[str, Any] | None
    holder: str
    started_at: datetime


def call_digest(tool: str, arguments: Any) -> str:
    """sha256 of the exact call (tool and arguments, keys sorted)."""
    text = json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class ToolJournal:
    """The journal in the store's database at ``url``."""

    def __init__(self, url: str, engine: Engine | None = None, chain: StoreChain | None = None,
                 audit_key: bytes | None = None) -> None:  # fmt: skip
        """``engine``: one already open on ``url`` (the guard shares its ledger's, so that a call's admission — its
        doubts, its ledger row and its intent — is one transaction); ``chain``: the store's chain its writes are
        linked in (store/audit.py; the guard shares its ledger's), else one of its own, signed with ``audit_key``
        when one is given (``[audit] sign``)."""
        self.engine = engine if engine is not None else open_engine(url)
        create_tables(self.engine, entries)
        self.chain = chain if chain is not None else StoreChain(self.engine, audit_key)
        self.holder = this_process()  # host:pid:start (holders.py)
        self._hot = _HotStatements(self.engine)
        database = self.engine.url.database or ""
        file = self.engine.dialect.name == "sqlite" and database not in ("", ":memory:") and "memory" not in database
        self._wal = database + "-wal" if file else None  # what ``durable`` fsyncs

    def begin(
        self, scope: str, position: int, tool: str, arguments: Any, db: Executes | None = None
    ) -> dict[str, Any] | None:
        """Journal the intent of a call, or return its recorded result when it already ran; ``CallInDoubt`` when it
        was in flight in a process that died. A resolved call's intent is written again (it may run). ``db``: the
        caller's transaction to write in (it commits it), else one of its own."""
        hot, key = self._hot, (scope, position, call_digest(tool, arguments))
        now = hot.moment(datetime.now(UTC))
        with within(self.engine, db) as db:
            changed = self.chain.changed(db, JOURNAL, key)
            if changed is not None:  # whether it ran, and what it returned, is no longer known
                raise CallInDoubt(f"{tool} ({scope} #{position}): the journal's {changed}; it may or may not "
                                  "have taken effect, and no recorded result is replayed; an operator decides")
            row = db.exec_driver_sql(hot.find, key).first()
            state, result, holder, started_at = row if row is not None else (None, "", None, None)
            if state == DONE:
                recorded: dict[str, Any] = json.loads(result)
                return recorded
            if state == INTENT:
                raise CallInDoubt(f"{tool} ({scope} #{position}) was started by {holder} at "
                                  f"{aware(hot.started(started_at)):%H:%M:%S} UTC and never finished: it may or "
                                  "may not have taken effect; an operator decides")  # fmt: skip
            if row is None:
                text = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
                db.exec_driver_sql(hot.insert, (*key, tool, text, INTENT, self.holder, now))
                self.chain.touch(db, JOURNAL, key, "intent")
            else:
                db.exec_driver_sql(hot.restart, (INTENT, self.holder, now, *key))
                self.chain.touch(db, JOURNAL, key, "restarted")
        return None

    def taken(self, scope: str, position: int, tool: str, arguments: Any, db: Executes | None = None) -> str | None:
        """The tool of another call (other tool or other arguments) journaled at this place — a client's idempotency
        key used before for a different call — or None."""
        with within(self.engine, db) as db:
            row = db.exec_driver_sql(self._hot.other, (scope, position, call_digest(tool, arguments))).first()
        return str(row[0]) if row is not None else None

    def durable(self) -> None:
        """Make every committed intent survive a power loss, before its effect runs. The store's SQLite runs in WAL
        with ``synchronous=NORMAL``: a commit reaches the operating system (a process crash loses nothing) but not
        the disk; fsyncing the WAL file puts every commit made so far on the disk — one fsync per effect, only on
        the path that runs one. PostgreSQL commits durably already (``synchronous_commit`` on, its default)."""
        if self._wal is not None:
            try:
                descriptor = os.open(self._wal, os.O_RDONLY)
            except FileNotFoundError:  # no WAL yet: every commit so far is in the database file, synced there
                return
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)

    def finish(self, scope: str, position: int, tool: str, arguments: Any, result: dict[str, Any]) -> None:
        """Journal the result of a call begun with the same scope, position, tool and arguments."""
        hot, key = self._hot, (scope, position, call_digest(tool, arguments))
        values = (DONE, json.dumps(result, ensure_ascii=False), hot.moment(datetime.now(UTC)))
        with hot_transaction(self.engine) as db:
            db.exec_driver_sql(hot.finished, (*values, *key))
            self.chain.touch(db, JOURNAL, key, "done")

    def in_doubt(self, scope_prefix: str) -> list[JournalEntry]:
        """The calls under ``scope_prefix`` with an intent and no result, oldest first."""
        query = (select(entries).where(entries.c.scope.startswith(scope_prefix, autoescape=True),
                                       entries.c.state == INTENT).order_by(entries.c.started_at))  # fmt: skip
        with reading(self.engine) as db:
            return [_entry(row) for row in db.execute(query).mappings()]

    def doubts(self, scope_prefix: str, tool: str, arguments: Any, db: Executes | None = None) -> bool:
        """Whether an identical call under ``scope_prefix`` is in doubt: an intent without a result whose process is
        gone (one whose process still runs is in flight, not in doubt — holders.py); read in ``db`` when the caller
        gives its transaction."""
        bound = (_starting_with(scope_prefix), call_digest(tool, arguments), INTENT)
        with within(self.engine, db) as read:
            return any(not alive(holder) for (holder,) in read.exec_driver_sql(self._hot.doubt, bound))

    def resolve(
        self, scope_prefix: str, operator: str, decision: str, tool: str | None = None, arguments: Any = None
    ) -> int:
        """An operator decided about the in-doubt calls under ``scope_prefix`` (only those identical to ``tool`` with
        ``arguments`` when a tool is given): they may run again. Their count."""
        resolution = json.dumps({"operator": operator, "decision": decision, "at": datetime.now(UTC).isoformat()})
        which = [entries.c.scope.startswith(scope_prefix, autoescape=True), entries.c.state == INTENT]
        if tool is not None:
            which.append(entries.c.digest == call_digest(tool, arguments))
        with self.engine.begin() as db:
            keys = [tuple(row) for row in db.execute(select(entries.c.scope, entries.c.position,
                                                            entries.c.digest).where(*which))]  # fmt: skip
            done = db.execute(update(entries).where(*which).values(state=RESOLVED, resolution=resolution))
            for key in keys:
                self.chain.touch(db, JOURNAL, key, "resolved")
        return int(done.rowcount or 0)

    def entries(self, scope_prefix: str) -> list[JournalEntry]:
        """Every journaled call under ``scope_prefix``, oldest first."""
        query = select(entries).where(entries.c.scope.startswith(scope_prefix, autoescape=True))
        with reading(self.engine) as db:
            return [_entry(row) for row in db.execute(query.order_by(entries.c.started_at)).mappings()]


class _HotStatements:
    """The statements of every call, as the database driver's own SQL (``DriverSQL``): through the expression layer
    they cost more than the database did (bench/mcp)."""

    def __init__(self, engine: Engine) -> None:
        driver = DriverSQL(engine)
        sql, at = driver.sql, "scope = ? AND position = ? AND digest = ?"
        self.find = sql(f"SELECT state, result, holder, started_at FROM tool_journal WHERE {at}")
        self.insert = sql("INSERT INTO tool_journal (scope, position, digest, tool, arguments, state, holder, "
                          "started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")  # fmt: skip
        self.restart = sql("UPDATE tool_journal SET state = ?, holder = ?, started_at = ?, finished_at = NULL, "
                           f"result = NULL WHERE {at}")  # fmt: skip
        self.finished = sql(f"UPDATE tool_journal SET state = ?, result = ?, finished_at = ? WHERE {at}")
        self.doubt = sql("SELECT holder FROM tool_journal WHERE scope LIKE ? ESCAPE '/' AND digest = ? AND state = ?")
        self.other = sql("SELECT tool FROM tool_journal WHERE scope = ? AND position = ? AND digest <> ? LIMIT 1")
        self.moment = driver.writer(entries.c.started_at)
        self.started = driver.reader(entries.c.started_at)


def _starting_with(prefix: str) -> str:
    """A LIKE pattern (escape character '/') for the scopes that start with ``prefix``, its wildcards literal."""
    return prefix.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"


def _entry(row: Any) -> JournalEntry:
    result = json.loads(row["result"]) if row["result"] else None
    return JournalEntry(row["scope"], row["position"], row["digest"], row["tool"], row["arguments"], row["state"],
                        result, row["holder"], aware(row["started_at"]))  # fmt: skip
