"""The durable store: an append-only event log and each run's state derived from it (SQLAlchemy).

A SQLite file by default, Postgres by URL. Appending an event and updating the run's derived row happen in one
transaction, and the per-run sequence number is unique, so two writers can never both append event N: the
second fails and retries on the new state. ``state(run_id)`` replays the log; the ``runs`` table is a cache of it
for listing.

One driver per run: ``acquire_lease`` gives a run to one holder for a time, renewed while it drives; the driver's
appends name it, and an append by a holder that lost its lease is refused, so two processes can never both run a
run's tools. Nothing is appended after a terminal event (RunCompleted, RunAborted); after RunFailed only an
explicit RunResumed. Reading checks the log: a gap in the sequence or an unreadable payload is a
``StoreCorrupt`` naming the run and the event.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

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
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine

from .. import safejson
from ..errors import ConfigurationError, ConflictError, NotFoundError, StateConflict, StoreError
from ..store import (
    DriverSQL,
    HeldConnection,
    NotText,
    aware,
    create_tables,
    gone_here,
    hot_transaction,
    open_engine,
    printable,
    reading,
    rows_apart,
    signature_of,
)
from . import chain
from . import run_events as ev
from .state import EventRefused, RunState, RunStatus

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
    Column("open_pauses", Integer),  # how many pauses wait for a decision (NULL in rows written before it)
    Column("chain", String(80)),  # the link of the run's last event (runtime/chain.py; NULL before chains)
    Column("chain_signature", String(120)),  # "SEQ:hmac-sha256:…" of the head at SEQ ([audit] sign), else NULL
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
    Column("chain", String(80)),  # its link, chained to the event before it (runtime/chain.py; NULL before chains)
    UniqueConstraint("run_id", "seq", name="one_event_per_seq"),
)

reports = Table(
    "guard_reports",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), ForeignKey("runs.id"), nullable=False, index=True),
    Column("seq", Integer, nullable=False),  # the run's last event when it was written (it precedes seq + 1)
    Column("body", Text, nullable=False),  # one report to the guards, as runtime/reported.py records it
)


leases = Table(
    "run_leases",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id"), primary_key=True),
    Column("holder", String(200), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)


Builder = Callable[[RunState], ev.Planned]  # the events that follow, from the run's state
INTERRUPTED = "interrupted"  # listed for a running run whose driver's lease has expired
UNREADABLE = "unreadable"  # listed for a run whose row cannot be read (changed outside groundstate)
_RUN_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,), "name": (str,), "status": (str,), "created_at": (datetime,), "updated_at": (datetime,),
    "last_seq": (int,), "paused_agent": (str, type(None)), "pause_reason": (str, type(None)),
    "open_pauses": (int, type(None)), "chain": (str, type(None)), "chain_signature": (str, type(None)),
}  # fmt: skip
_LEASE_TYPES: dict[str, tuple[type, ...]] = {"run_id": (str,), "holder": (str,), "expires_at": (datetime,)}
_STATUSES = frozenset(status.value for status in RunStatus)


def _misfit(row: dict[str, Any], types: dict[str, tuple[type, ...]]) -> str | None:
    """Why a row of ``runs`` or ``run_leases`` is not one groundstate wrote, or None: a value of another type (SQLite
    keeps what it is given: an open_pauses of ``'x'``), a boolean for a number, a status no run has."""
    for column, allowed in types.items():
        value = row.get(column)
        if not isinstance(value, allowed) or isinstance(value, bool):
            return f"its {column} holds {type(value).__name__}, not what groundstate writes there"
    if "status" in types and row["status"] not in _STATUSES:
        return "its status is none a run has"
    return None


def _unreadable(run_id: str, why: str) -> dict[str, Any]:
    """A run's listing when its row cannot be read: every key a listing has, the status ``unreadable``, and why."""
    return {"id": run_id, "name": "", "status": UNREADABLE, "created_at": None, "updated_at": None, "last_seq": 0,
            "paused_agent": None, "pause_reason": None, "open_pauses": 0, "chain": None, "chain_signature": None,
            "problem": f"run {run_id}: its row cannot be read ({why}); the store was changed outside groundstate"}


class UnknownRun(NotFoundError, StoreError, ConfigurationError):
    """No run has this id in the store (a mistyped id, or another database)."""


class LeaseHeld(ConflictError):
    """Another process drives the run (or drove it and its lease has not yet expired)."""


class LeaseLost(StoreError):
    """This driver's lease was taken over; it must stop writing."""


class StoreCorrupt(StoreError):
    """The stored log of a run cannot be trusted: a gap in its sequence or an unreadable event."""


class LogChanged(StoreCorrupt, StateConflict):
    """A run's log was changed outside groundstate since it wrote it, so nothing is done on it (an HTTP surface
    answers 409: the run's state is not one groundstate acts on; ``audit verify`` names the change)."""


class Awaiting(NamedTuple):
    """The runs awaiting approval (``EventStore.awaiting``): the states read, and each unreadable run's error."""

    states: list[RunState]
    unreadable: dict[str, StoreCorrupt]  # by run id


class EventStore:
    """The runs' event logs in SQL (SQLite or PostgreSQL), with one lease per run for its driver."""

    def __init__(self, url: str, audit_key: bytes | None = None) -> None:
        """``audit_key``: sign each run's chain head as events are appended (``[audit] sign``; docs/audit.md)."""
        self.url, self.audit_key = url, audit_key
        self.engine: Engine = open_engine(url)
        create_tables(self.engine, *metadata.sorted_tables)
        self._lock = threading.Lock()  # one writer per process; the unique (run_id, seq) guards across processes
        self._cache: dict[str, RunState] = {}  # derived states, advanced event by event
        # the runs whose cached state was replayed in a writing transaction that checked the links (or advanced from
        # one by this process's own appends); a state read outside one (``state``) is not vouched for until then
        self._vouched: set[str] = set()
        # statements built once: constructing SQLAlchemy expressions per event costs more than running them
        lock = select(runs.c.last_seq).where(runs.c.id == bindparam("rid"))
        self._lock_run = lock if self.engine.dialect.name == "sqlite" else lock.with_for_update()
        self._hot = _HotStatements(self.engine)  # an event's append and a state's freshness check, as driver SQL
        self._held = HeldConnection.of(self.engine)  # runs them on a SQLite file (None: the pool does)

    # -- writing -------------------------------------------------------------------------------------
    def create_run(
        self,
        name: str,
        workflow_text: str,
        model: str | None,
        run_id: str | None = None,
        actor: str = "runtime",
        **details: Any,
    ) -> str:
        """A new run with its RunCreated event (appended by ``actor``), in one transaction: a crash leaves the run
        whole or absent, never a row without its log; returns its id. ``details`` (the pinned policy, the recorded
        models and budgets) go into the event as given; empty ones are left out."""
        run_id = run_id or f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        chosen = {key: value for key, value in details.items() if value}
        created = ev.RunCreated(name=name, workflow=workflow_text, model=model, **chosen)
        self.transact(run_id, lambda state: [(created, None)], actor, creating=name)
        return run_id

    def append(
        self,
        run_id: str,
        body: ev.EventBody,
        agent: str | None = None,
        actor: str = "runtime",
        holder: str | None = None,
    ) -> ev.Event:
        """Append one event; returns it with its sequence number."""
        return self.transact(run_id, lambda state: [(body, agent)], actor, holder)[0]

    def transact(
        self,
        run_id: str,
        build: Builder,
        actor: str = "runtime",
        holder: str | None = None,
        reports: list[dict[str, Any]] | None = None,
        *,
        despite_changes: bool = False,
        creating: str | None = None,
    ) -> list[ev.Event]:
        """Atomically: read the run's state, let ``build`` decide which events follow (it may raise to refuse),
        append them. Concurrent writers are serialised on the run's row, so two decisions cannot both apply.
        With ``holder`` (a driver), the append is refused unless that holder still has the run's lease.
        ``reports``: what the run's guards were told since the last write (runtime/reported.py), kept with them.
        A log replayed here must hold its links (LogChanged otherwise), unless ``despite_changes``: an operator's
        abort, which acts on nothing the log says, ends even a run whose log was changed. ``creating``: the run is
        new, with this name — its row is inserted in the same transaction as its first events."""
        hot = self._hot
        with self._lock, self._held.transaction() if self._held else hot_transaction(self.engine) as db:
            if creating is not None:
                now = hot.moment(datetime.now(UTC))
                db.exec_driver_sql(hot.new_run, (run_id, creating, RunStatus.PENDING.value, now, now))
            row = db.exec_driver_sql(hot.lock, (run_id,)).first()  # the run's row, locked, and its lease's holder
            if row is None:
                raise UnknownRun(f"there is no run {run_id}")
            last_seq, leased_to, head = row
            if holder is not None and leased_to != holder:
                raise LeaseLost(f"run {run_id} is no longer driven by this process (its lease was taken over)")
            state = self._cache.pop(run_id, None)
            if state is None or state.last_seq != last_seq or run_id not in self._vouched:
                # another process wrote, or this one only read: replay what the links vouch for
                self._vouched.discard(run_id)
                if not despite_changes:  # a writer appends only after what the chain vouches for
                    self._refuse_changed(self._verdict(db, run_id), "nothing is appended to")
                state = self._state(db, run_id, last_seq)
            # escaped (a model's lone surrogate never fails the write); a value JSON has no form for is kept as its
            # text: replay then says it cannot re-decide it, the run is never failed
            db.exec_many(hot.report, [(run_id, last_seq, json.dumps(report, default=str)) for report in reports or ()])
            appended, rows = [], []
            for body, agent in build(state):
                state.admit(body, agent)  # EventRefused (RunEnded) before anything is written
                record = ev.Event(run_id, state.last_seq + 1, body, agent, actor=actor)
                text = json.dumps(record.payload)
                head = chain.link(head or chain.GENESIS, run_id, record.type, agent, text, actor, record.at)
                rows.append((run_id, record.seq, record.type, agent, text, actor, hot.moment(record.at), head))
                state.apply(record)
                appended.append(record)
            db.exec_many(hot.insert, rows)  # in their order, in this transaction: as one statement each
            if appended:
                pause = state.pause
                values = (str(state.status), state.last_seq, hot.moment(appended[-1].at),
                          pause.agent if pause else None, pause.reason if pause else None, len(state.pauses), head)
                if self.audit_key is None:
                    db.exec_driver_sql(hot.update, (*values, run_id))
                else:
                    signed = f"{state.last_seq}:{signature_of(self.audit_key, 'run:' + run_id, state.last_seq, head)}"
                    db.exec_driver_sql(hot.update_signed, (*values, signed, run_id))
        self._cache[run_id] = state  # only once the transaction has committed
        if not despite_changes:
            self._vouched.add(run_id)
        return appended

    def verify(self, run_id: str, key: bytes | None = None, required: bool = False,
               listing: bool = False) -> chain.Verdict:  # fmt: skip
        """Recompute the run's chain of events from the stored rows (runtime/chain.py): the first event that was
        changed, removed, inserted or reordered since groundstate wrote it, if any; with ``key``, the signed head
        checked too; ``required`` (``[audit] sign`` on): an unsigned head or events without a link fail.
        ``listing``: the run's row in ``runs`` (its status and open pauses, which the listings and the inbox read)
        must also be what the log replays to. One reading transaction: the log and its row as they stood together."""
        with reading(self.engine) as db:
            verdict = self._verdict(db, run_id, key, required)
            if not verdict.ok or not listing:
                return verdict
            problem = self._listed_apart(db, run_id)
        return verdict if problem is None else replace(verdict, ok=False, seq=None, how="changed", detail=problem)

    def _verdict(self, db: Any, run_id: str, key: bytes | None = None, required: bool = False) -> chain.Verdict:
        """What the run's chain says, read in ``db`` (``verify``'s, or the transaction about to append)."""
        found = db.exec_driver_sql(self._hot.head, (run_id,)).first()
        if found is None:
            raise UnknownRun(f"there is no run {run_id}")
        head, last_seq = found
        rows: list[chain.Row] = []
        try:
            for values in db.exec_driver_sql(self._hot.chained, (run_id,)):
                rows.append(chain.row_of(values, self._hot.read_at))
        except NotText as exc:  # groundstate wrote UTF-8: the row after the last one read was changed
            seq = rows[-1].seq + 1 if rows and isinstance(rows[-1].seq, int) else 1
            return chain.Verdict(run_id, False, len(rows), 0, head or "", seq, "changed",
                                 f"its {exc.column} is not UTF-8 text")  # fmt: skip
        signed = db.exec_driver_sql(self._hot.signed, (run_id,)).first()
        return chain.verify(run_id, rows, head, last_seq, signed[0] if signed else None, key, required)

    @staticmethod
    def _refuse_changed(verdict: chain.Verdict, refused: str, hint: str = "") -> None:
        """LogChanged, saying what is ``refused`` (and ``hint``: what still can be done), unless the chain held."""
        if not verdict.ok:
            raise LogChanged(f"run {verdict}: {refused} a log changed outside groundstate (`groundstate audit "
                             f"verify` names every change{hint})")  # fmt: skip

    def _listed_apart(self, db: Any, run_id: str) -> str | None:
        """How the run's row in ``runs`` — what the listings and the inbox read, a cache of its log — differs from
        what its log replays to, read in ``db`` (None: it does not): an edited status hides a waiting run from the
        inbox."""
        found = db.execute(select(runs.c.status, runs.c.open_pauses, runs.c.last_seq, runs.c.paused_agent,
                                  runs.c.pause_reason).where(runs.c.id == run_id)).first()  # fmt: skip
        if found is None:
            return "the run's row was removed"
        try:
            state = self._state(db, run_id, found.last_seq)
        except StoreCorrupt as exc:
            return str(exc)
        said = (found.status, found.open_pauses)
        replayed = (str(state.status), len(state.pauses))
        if said != replayed and not (found.open_pauses is None and said[0] == replayed[0]):  # None: before the count
            return (f"the runs table lists it as {found.status} with {found.open_pauses} open pauses; its log says "
                    f"{state.status} with {len(state.pauses)} (the row was changed outside groundstate)")
        pause = state.pause
        if (found.paused_agent, found.pause_reason) != ((pause.agent, pause.reason) if pause else (None, None)):
            return ("the runs table shows another pause than its log's (agent or reason): the row was changed "
                    "outside groundstate")  # fmt: skip
        return None

    def check_untouched(self, run_id: str, key: bytes | None, required: bool, doing: str) -> None:
        """LogChanged naming the first change, unless the run's log is the one groundstate wrote (its chain, and
        with ``key`` its signed head, verified; ``required``, as ``verify`` takes it: signed it must be): nothing is
        appended after an event changed outside groundstate, and nobody acts on what it says. ``doing``: what is
        refused, for the message."""
        verdict = self.verify(run_id, key, required)
        if run_id not in self._vouched:  # read outside a checked transaction: read again, after this check
            self._cache.pop(run_id, None)
        self._refuse_changed(verdict, f"{doing} refused on",
                             "; `runs decide RUN abort` still ends a run that waits for a decision")

    def guard_reports(self, run_id: str) -> list[tuple[int, Any]]:
        """What the run's guards were told, in order (runtime/reported.py), each with the run's last event when it
        was written: what ``policy replay --run`` re-decides. A row that cannot be read is given as the StoreCorrupt
        naming it, in its place: the replay of that run stops there and says why; the others go on."""
        found: list[tuple[int, Any]] = []
        with reading(self.engine) as db:
            try:
                for seq, body in db.exec_driver_sql(self._hot.reports, (run_id,)):
                    place = seq if isinstance(seq, int) else -1
                    try:
                        if not isinstance(body, str):
                            raise ValueError("not text")
                        found.append((place, safejson.loads(body)))
                    except ValueError as exc:
                        found.append((place, StoreCorrupt(f"run {run_id}: a guard report after event {seq!r} cannot "
                                                          f"be read ({exc})")))  # fmt: skip
            except NotText as exc:  # the rows after it cannot be reached either: the replay stops here
                after = found[-1][0] if found else 0
                found.append((after, StoreCorrupt(f"run {run_id}: a guard report after event {after} cannot be "
                                                  f"read ({exc})")))  # fmt: skip
        return found

    def orphaned(self) -> list[str]:
        """Runs whose events remain while their row is gone (removed outside groundstate): ``audit verify``."""
        with reading(self.engine) as db:
            try:
                return [str(run) for (run,) in db.exec_driver_sql(self._hot.orphaned)]
            except NotText:  # a run id that is not UTF-8 (SQLite only): named by its bytes, escaped
                raw = "SELECT DISTINCT CAST(run_id AS BLOB) FROM events WHERE run_id NOT IN (SELECT id FROM runs)"
                return [printable(run) for (run,) in db.exec_driver_sql(raw)]

    # -- leases ---------------------------------------------------------------------------------------
    def acquire_lease(self, run_id: str, holder: str, seconds: float) -> None:
        """Give the run to ``holder`` for ``seconds`` (or renew it); LeaseHeld if another live holder has it."""
        now = datetime.now(UTC)
        with self._lock, self.engine.begin() as db:
            if db.execute(self._lock_run, {"rid": run_id}).first() is None:
                raise UnknownRun(f"there is no run {run_id}")
            current = db.execute(select(leases).where(leases.c.run_id == run_id)).mappings().first()
            expires = now + timedelta(seconds=seconds)
            if current is None:
                db.execute(insert(leases).values(run_id=run_id, holder=holder, expires_at=expires))
                return
            until = aware(current["expires_at"])
            # a holder on this host whose process is gone (pid and start time) has no lease left to wait out
            if current["holder"] != holder and until > now and not gone_here(current["holder"]):
                raise LeaseHeld(
                    f"run {run_id} is being driven by {current['holder']} (its lease runs until "
                    f"{until:%H:%M:%S} UTC); wait for it to finish, or if that process is gone, try again after "
                    "its lease expires"
                )
            db.execute(update(leases).where(leases.c.run_id == run_id).values(holder=holder, expires_at=expires))

    def renew_lease(self, run_id: str, holder: str, seconds: float) -> None:
        """Extend this holder's lease; LeaseLost if another holder has taken the run over."""
        with self._lock, self.engine.begin() as db:
            done = db.execute(
                update(leases)
                .where(leases.c.run_id == run_id, leases.c.holder == holder)
                .values(expires_at=datetime.now(UTC) + timedelta(seconds=seconds))
            )
            if done.rowcount != 1:
                raise LeaseLost(f"run {run_id} is no longer driven by this process (its lease was taken over)")

    def lease(self, run_id: str) -> tuple[str, datetime] | None:
        """The run's lease as it stands: its holder and when it expires (None: nobody holds it)."""
        with reading(self.engine) as db:
            row = db.execute(select(leases).where(leases.c.run_id == run_id)).first()
        return None if row is None else (row.holder, aware(row.expires_at))

    def leases(self) -> list[tuple[str, str, datetime]]:
        """Every lease: run, holder, expiry (lapsed ones included: a crashed driver's stays until taken over)."""
        with reading(self.engine) as db:
            rows = db.execute(select(leases).order_by(leases.c.run_id)).all()
        return [(row.run_id, row.holder, aware(row.expires_at)) for row in rows]

    def release_lease(self, run_id: str, holder: str) -> None:
        """Give up the run's lease, if ``holder`` still has it."""
        with self._lock, self.engine.begin() as db:
            db.execute(leases.delete().where(leases.c.run_id == run_id, leases.c.holder == holder))

    # -- reading -------------------------------------------------------------------------------------
    def events(self, run_id: str, after: int = 0) -> list[ev.Event]:
        """The run's events after sequence number ``after`` (StoreCorrupt if the log has a gap)."""
        with reading(self.engine) as db:
            return self._events(db, run_id, after)

    def state(self, run_id: str) -> RunState:
        """The run's state (treat it as read-only: it may be the store's cached copy)."""
        cached = self._cache.get(run_id)
        if cached is not None and cached.last_seq == self._last_seq(run_id):
            return cached  # nobody wrote since: one statement on a pooled driver connection, no transaction of ours
        with reading(self.engine) as db:
            row = db.exec_driver_sql(self._hot.last_seq, (run_id,)).first()
            if row is None:
                raise UnknownRun(f"there is no run {run_id}")
            cached = self._cache.get(run_id)
            if cached is not None and cached.last_seq == row.last_seq:
                return cached
            self._vouched.discard(run_id)
            state = self._cache[run_id] = self._state(db, run_id, row.last_seq)
            return state

    def _last_seq(self, run_id: str) -> int | None:
        """The run's last sequence number as the database has it now (None: no such run) — the freshness check every
        state read makes, without SQLAlchemy's connection and result layers (~15 µs instead of ~100), and on SQLite
        on the store's held connection (no pool either)."""
        if self._held is not None:
            held = self._held.first(self._hot.last_seq, (run_id,))
            return None if held is None else int(held[0])
        connection = self.engine.raw_connection()
        try:
            cursor = connection.cursor()
            cursor.execute(self._hot.last_seq, (run_id,))
            row = cursor.fetchone()
            cursor.close()
            return None if row is None else int(row[0])
        finally:
            connection.close()  # back to the pool (which ends any transaction the driver opened)

    def known_state(self, run_id: str) -> RunState:
        """The run's state as this process last wrote or read it, without asking the database whether another
        process wrote since — for what only the run's driver changes (its attempts' usage, the agents it spawned);
        ``state`` for anything else. Read-only, like ``state``'s."""
        cached = self._cache.get(run_id)
        return cached if cached is not None else self.state(run_id)

    def runs(self) -> list[dict[str, Any]]:
        """Every run, newest first; a running run whose driver's lease has lapsed is listed as interrupted. A run
        whose row (or lease) cannot be read — changed outside groundstate — is listed last as ``unreadable``, with
        the ``problem``: one damaged row never hides the others."""
        now = datetime.now(UTC)
        with reading(self.engine) as db:
            rows, apart = rows_apart(db, runs, runs.c.id)
            held, damaged = rows_apart(db, leases, leases.c.run_id)
        unread = dict(damaged)
        live = set()
        for lease in held:
            problem = _misfit(lease, _LEASE_TYPES)
            if problem is not None:
                unread[printable(lease["run_id"])] = problem
            elif aware(lease["expires_at"]) > now and not gone_here(lease["holder"]):
                live.add(lease["run_id"])
        listed = []
        for row in rows:
            problem = _misfit(row, _RUN_TYPES) or (f"its lease: {unread[row['id']]}" if row["id"] in unread else None)
            if problem is not None:
                apart.append((row["id"] if isinstance(row["id"], str) else printable(row["id"]), problem))
                continue
            if row["open_pauses"] is None:  # written before the count was kept: its leading pause, if any
                row["open_pauses"] = 1 if row["status"] == RunStatus.AWAITING_APPROVAL else 0
            if row["status"] == RunStatus.RUNNING and row["id"] not in live:
                row["status"] = INTERRUPTED
            listed.append(row)
        listed.sort(key=lambda row: (row["created_at"], row["id"]), reverse=True)
        return listed + [_unreadable(run_id, why) for run_id, why in apart]

    def awaiting(self, rows: list[dict[str, Any]] | None = None) -> Awaiting:
        """The state of every run awaiting approval, newest first (from ``rows``, a ``runs()`` listing the caller
        already has, else from a new one) — and, apart, the StoreCorrupt of each such run whose log cannot be read:
        one damaged run never hides the others' pauses from the inbox."""
        listed = self.runs() if rows is None else rows
        found = Awaiting([], {})
        for row in listed:
            if row["status"] == UNREADABLE:  # what it awaits cannot be known: listed apart with the others
                found.unreadable[row["id"]] = StoreCorrupt(row["problem"])
            elif row["status"] == RunStatus.AWAITING_APPROVAL:
                try:
                    found.states.append(self.state(row["id"]))
                except StoreCorrupt as exc:
                    found.unreadable[row["id"]] = exc
        return found

    def _state(self, db: Any, run_id: str, last_seq: Any) -> RunState:
        """The run replayed from its log, which must reach ``last_seq``, the last event its row says was written (a
        log cut short — events removed outside groundstate — would replay to an earlier state, silently)."""
        history = self._events(db, run_id, 0)
        if isinstance(last_seq, int) and len(history) < last_seq:
            raise StoreCorrupt(f"run {run_id}: event {len(history) + 1} is missing from the log (its last event "
                               f"is {len(history)}, the run's row says {last_seq}); the store was changed outside "
                               "groundstate")  # fmt: skip
        try:
            return RunState.replay(run_id, history)
        except EventRefused as exc:
            raise StoreCorrupt(f"{exc}; the store was changed outside groundstate") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreCorrupt(
                f"run {run_id}: an event lacks a field it must have ({type(exc).__name__}: {exc}); "
                "the store was changed outside groundstate"
            ) from None

    def _events(self, db: Any, run_id: str, after: int) -> list[ev.Event]:
        out: list[ev.Event] = []
        expected = after + 1
        try:
            for run, seq, kind, agent, payload, actor, at in db.exec_driver_sql(self._hot.history, (run_id, after)):
                if seq != expected:
                    raise StoreCorrupt(f"run {run_id}: event {expected} is missing from the log (the next stored "
                                       f"event is {seq}); the store was changed outside groundstate")  # fmt: skip
                row = {"run_id": run, "seq": seq, "type": kind, "agent": agent, "payload": payload, "actor": actor}
                out.append(_event({**row, "at": at}, self._hot.read_at))
                expected += 1
        except NotText as exc:  # the row after the last one read: the event the log should hold next
            raise StoreCorrupt(f"run {run_id}: event {expected} cannot be read: its {exc.column} is not UTF-8 "
                               "text; the store was changed outside groundstate") from None  # fmt: skip
        return out


class _HotStatements:
    """The statements every event and every state read runs, as the database driver's own SQL (``DriverSQL``)."""

    def __init__(self, engine: Engine) -> None:
        driver = DriverSQL(engine)
        sql = driver.sql
        locking = "" if driver.dialect.name == "sqlite" else " FOR UPDATE OF runs"  # SQLite: the file's write lock
        self.lock = sql("SELECT runs.last_seq, run_leases.holder, runs.chain FROM runs LEFT OUTER JOIN run_leases ON "
                        f"run_leases.run_id = runs.id WHERE runs.id = ?{locking}")  # fmt: skip
        self.new_run = sql("INSERT INTO runs (id, name, status, created_at, updated_at, last_seq) "
                           "VALUES (?, ?, ?, ?, ?, 0)")  # fmt: skip
        self.insert = sql("INSERT INTO events (run_id, seq, type, agent, payload, actor, at, chain) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")  # fmt: skip
        self.update = sql("UPDATE runs SET status = ?, last_seq = ?, updated_at = ?, paused_agent = ?, "
                          "pause_reason = ?, open_pauses = ?, chain = ? WHERE id = ?")  # fmt: skip
        self.update_signed = sql("UPDATE runs SET status = ?, last_seq = ?, updated_at = ?, paused_agent = ?, "
                                 "pause_reason = ?, open_pauses = ?, chain = ?, chain_signature = ? WHERE id = ?")
        self.signed = sql("SELECT chain_signature FROM runs WHERE id = ?")
        self.report = sql("INSERT INTO guard_reports (run_id, seq, body) VALUES (?, ?, ?)")
        self.reports = sql("SELECT seq, body FROM guard_reports WHERE run_id = ? ORDER BY id")
        self.orphaned = sql("SELECT DISTINCT run_id FROM events WHERE run_id NOT IN (SELECT id FROM runs) "
                            "ORDER BY run_id")  # fmt: skip
        self.chained = sql("SELECT seq, type, agent, payload, actor, at, chain, id FROM events WHERE run_id = ? "
                           "ORDER BY seq, id")  # fmt: skip
        self.head = sql("SELECT chain, last_seq FROM runs WHERE id = ?")
        self.last_seq = sql("SELECT last_seq FROM runs WHERE id = ?")
        self.history = sql("SELECT run_id, seq, type, agent, payload, actor, at FROM events "
                           "WHERE run_id = ? AND seq > ? ORDER BY seq")  # fmt: skip
        self.moment = driver.writer(events.c.at)  # a timestamp as the ``at``/``updated_at`` columns hand it over
        self.read_at = driver.reader(events.c.at)  # and back


def _event(r: Any, read_at: Callable[[Any], Any]) -> ev.Event:
    try:
        payload = safejson.loads(r["payload"])
        at = read_at(r["at"])
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        return ev.Event.parsed(r["run_id"], r["seq"], r["type"], r["agent"], payload, at, r["actor"])
    except (ValueError, TypeError, AttributeError) as exc:  # EventMisfit is a ValueError: it says what does not fit
        raise StoreCorrupt(f"run {r['run_id']}: event {r['seq']} ({r['type']}) cannot be read: {exc}") from None
