"""The durable store: an append-only event log and each run's state derived from it (SQLAlchemy).

A SQLite file by default, Postgres by URL. Appending an event and updating the run's derived row happen in one
transaction, and the per-run sequence number is unique, so two writers can never both append event N: the
second fails and retries on the new state. ``state(run_id)`` replays the log; the ``runs`` table is a cache of it
for listing.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    create_engine,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine

from . import events as ev
from .state import RunState

metadata = MetaData()
runs = Table(
    "runs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("status", String(32), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("last_seq", Integer, nullable=False),
    Column("paused_agent", String(200)),
    Column("pause_reason", Text),
)
events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), ForeignKey("runs.id"), nullable=False, index=True),
    Column("seq", Integer, nullable=False),
    Column("type", String(40), nullable=False),
    Column("agent", String(200)),
    Column("payload", Text, nullable=False),
    Column("actor", String(200), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("run_id", "seq", name="one_event_per_seq"),
)


Builder = Callable[[RunState], list[tuple[str, str | None, dict[str, Any]]]]


class StoreError(RuntimeError):
    """A store operation that cannot be carried out (unknown run, a conflicting write)."""


class EventStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: Engine = create_engine(url, future=True)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
            event.listen(self.engine, "begin", _sqlite_begin)
        metadata.create_all(self.engine)
        self._lock = threading.Lock()  # one writer per process; the unique (run_id, seq) guards across processes
        self._cache: dict[str, RunState] = {}  # derived states, advanced event by event
        # statements built once: constructing SQLAlchemy expressions per event costs more than running them
        lock = select(runs.c.last_seq).where(runs.c.id == bindparam("rid"))
        self._lock_run = lock if self.engine.dialect.name == "sqlite" else lock.with_for_update()
        self._insert_event = insert(events)
        self._update_run = (
            update(runs)
            .where(runs.c.id == bindparam("rid"))
            .values(status=bindparam("status"), last_seq=bindparam("last_seq"), updated_at=bindparam("updated_at"),
                    paused_agent=bindparam("paused_agent"), pause_reason=bindparam("pause_reason"))
        )  # fmt: skip

    # -- writing -------------------------------------------------------------------------------------
    def create_run(self, name: str, workflow_text: str, model: str | None, run_id: str | None = None) -> str:
        run_id = run_id or f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        now = datetime.now(UTC)
        with self._lock, self.engine.begin() as db:
            db.execute(insert(runs).values(id=run_id, name=name, status="pending", created_at=now, updated_at=now,
                                           last_seq=0))  # fmt: skip
        self.append(run_id, ev.RUN_CREATED, None, {"name": name, "workflow": workflow_text, "model": model})
        return run_id

    def append(
        self, run_id: str, event_type: str, agent: str | None, payload: dict[str, Any], actor: str = "runtime"
    ) -> ev.Event:
        """Append one event; returns it with its sequence number."""
        return self.transact(run_id, lambda state: [(event_type, agent, payload)], actor)[0]

    def transact(self, run_id: str, build: Builder, actor: str = "runtime") -> list[ev.Event]:
        """Atomically: read the run's state, let ``build`` decide which events follow (it may raise to refuse),
        append them. Concurrent writers are serialised on the run's row, so two decisions cannot both apply."""
        with self._lock, self.engine.begin() as db:
            row = db.execute(self._lock_run, {"rid": run_id}).first()
            if row is None:
                raise StoreError(f"there is no run {run_id}")
            state = self._cache.pop(run_id, None)
            if state is None or state.last_seq != row.last_seq:  # another process wrote: replay
                state = self._state(db, run_id)
            appended = []
            for event_type, agent, payload in build(state):
                if event_type not in ev.EVENT_TYPES:
                    raise StoreError(f"unknown event type {event_type}")
                record = ev.Event(run_id, state.last_seq + 1, event_type, agent, payload, actor=actor)
                row_values = {"run_id": run_id, "seq": record.seq, "type": event_type, "agent": agent,
                              "payload": json.dumps(payload), "actor": actor, "at": record.at}  # fmt: skip
                db.execute(self._insert_event, row_values)
                state.apply(record)
                appended.append(record)
            if appended:
                db.execute(self._update_run, {
                    "rid": run_id, "status": state.status, "last_seq": state.last_seq, "updated_at": appended[-1].at,
                    "paused_agent": state.pause.agent if state.pause else None,
                    "pause_reason": state.pause.reason if state.pause else None})  # fmt: skip
        self._cache[run_id] = state  # only once the transaction has committed
        return appended

    # -- reading -------------------------------------------------------------------------------------
    def events(self, run_id: str, after: int = 0) -> list[ev.Event]:
        with self.engine.connect() as db:
            return self._events(db, run_id, after)

    def state(self, run_id: str) -> RunState:
        """The run's state (treat it as read-only: it may be the store's cached copy)."""
        with self.engine.connect() as db:
            row = db.execute(select(runs.c.last_seq).where(runs.c.id == run_id)).first()
            if row is None:
                raise StoreError(f"there is no run {run_id}")
            cached = self._cache.get(run_id)
            if cached is not None and cached.last_seq == row.last_seq:
                return cached
            state = self._cache[run_id] = self._state(db, run_id)
            return state

    def runs(self) -> list[dict[str, Any]]:
        with self.engine.connect() as db:
            rows = db.execute(select(runs).order_by(runs.c.created_at.desc(), runs.c.id.desc())).mappings().all()
        return [dict(row) for row in rows]

    def _state(self, db: Any, run_id: str) -> RunState:
        return RunState.replay(run_id, self._events(db, run_id, 0))

    @staticmethod
    def _events(db: Any, run_id: str, after: int) -> list[ev.Event]:
        rows = db.execute(
            select(events).where(events.c.run_id == run_id, events.c.seq > after).order_by(events.c.seq)
        ).mappings()
        return [_event(r) for r in rows]


def _event(r: Any) -> ev.Event:
    at = r["at"] if r["at"].tzinfo else r["at"].replace(tzinfo=UTC)
    return ev.Event(r["run_id"], r["seq"], r["type"], r["agent"], json.loads(r["payload"]), at, r["actor"])


def _sqlite_begin(connection: Any) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")  # take the write lock at once: no stale read before a write


def _sqlite_pragmas(connection: Any, _: Any) -> None:
    connection.isolation_level = None  # SQLAlchemy's begin event issues BEGIN IMMEDIATE instead of pysqlite
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()
