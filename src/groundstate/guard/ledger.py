"""The guard's ledger, in the run store's database (SQLite or PostgreSQL): every decision on a tools/call — who
called, what, what the policy decided and why — and the calls held for an operator, which the console, the API and
`groundstate approvals` decide while the guard process waits.

A held call is bound to its exact tool and arguments (their digest, recorded with it): an operator decides that
one call, once; a decision after the call expired, on a call already decided, or naming another digest is refused.

A held call has a living waiter or it is not held: the guard process that holds it is recorded with it (``waiter``);
a client that cancels the call or closes its session withdraws it, and so does the waiter's death (found when an
operator decides or lists: the call is marked ``withdrawn`` with why, and the decision is refused) — approving a
call nobody waits for would record "approved" while nothing runs.

A held call may also be *parked*: its client was answered "held, ask again" (``mcp.hold_wait_sec``: clients such as
the OpenAI Agents SDK give up on a request after 5 s) and nobody waits for it in between; its waiter is then empty
and it stays held until it expires. The identical call (same digest, same client) asks again and joins it; once an
operator decided, the first such call is *answered* (``answered``): it runs the approved call or reads the denial,
exactly once — a later identical call is a new decision.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    select,
    type_coerce,
    update,
)

from ..errors import ConflictError, NotFoundError, StateConflict, StoreError
from ..logic import encode_facts
from ..store import (
    LEDGER,
    DriverSQL,
    Executes,
    StoreChain,
    aware,
    create_tables,
    decision_refused,
    gone_here,
    open_engine,
    reading,
    this_process,
    within,
)

HELD, APPROVED, DENIED, EXPIRED, WITHDRAWN = "held", "approved", "denied", "expired", "withdrawn"
UNREADABLE = "unreadable"  # listed for an entry whose row cannot be read (changed outside groundstate)

_TABLES = MetaData()
decisions = Table(
    "mcp_decisions", _TABLES,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("call", String(40)),  # the policy's name for it, as its derivation shows (added later: may be null)
    Column("server", String(200), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("arguments", Text, nullable=False),
    Column("digest", String(80), nullable=False),
    Column("client", String(200), nullable=False),
    Column("decision", String(16), nullable=False),  # permit, deny, approve (as the policy decided)
    Column("reasons", Text, nullable=False),
    Column("why", Text, nullable=False),
    Column("status", String(16), nullable=False),  # for approvals: held, approved, denied, expired; else the decision
    Column("expires_at", DateTime(timezone=True)),
    Column("operator", String(200)),
    Column("decided_at", DateTime(timezone=True)),
    Column("waiter", String(200)),  # the guard process holding the call (host:pid:start), while it is held
    Column("ended", Text),  # why a held call was withdrawn or expired
    Column("answered", DateTime(timezone=True)),  # a decided held call: when its outcome went to a client (once)
    Column("account", String(200)),  # the operator account whose token made the call (HTTP), else null
    Column("policy", String(80)),  # the digest of the policy that decided (McpPolicy.digest; null before it was kept)
    Column("shadow", Text),  # what the shadow policy would have decided: {"decision", "reasons"} ([mcp] shadow)
    Column("facts", Text),  # what the policy decided from (logic/recorded.py): policy replay re-decides from them
)  # fmt: skip


class ApprovalRefused(ConflictError):
    """A decision on a held call that cannot apply: already decided or expired, another digest."""


class RowChanged(StoreError, StateConflict):
    """A held call's row in the ledger is not what its last link in the store's chain recorded: it was changed or
    removed outside groundstate, and nothing is decided or run on it (an HTTP surface answers 409)."""


class UnknownCall(NotFoundError):
    """A decision on a call the ledger does not have: a name to fix (exit 2; a 404, like an unknown run)."""


@dataclass(frozen=True)
class Entry:
    """One decision of the ledger, as the console and the CLI show it."""

    id: int
    at: datetime
    call: str | None
    server: str
    tool: str
    arguments: dict[str, Any]
    digest: str
    client: str
    decision: str
    reasons: list[str]
    why: str
    status: str
    expires_at: datetime | None
    operator: str | None
    ended: str | None = None  # why a held call was withdrawn or expired
    waiter: str | None = None  # the guard process holding it (host:pid:start): not served
    account: str | None = None  # the operator account whose token made the call (HTTP)
    policy: str | None = None  # the digest of the policy that decided it
    shadow: dict[str, Any] | None = None  # what the shadow policy would have decided ({"decision", "reasons"})

    @property
    def disagrees(self) -> bool:
        """The shadow policy would have decided the call otherwise."""
        return self.shadow is not None and self.shadow.get("decision") != self.decision

    def to_json(self) -> dict[str, Any]:
        """The entry as the API serves it."""
        data = self.__dict__.copy()
        data.pop("waiter")
        data["at"] = self.at.isoformat()
        data["expires_at"] = self.expires_at.isoformat() if self.expires_at else None
        return data


@dataclass(frozen=True)
class Recorded:
    """A decision as recorded, for a replay: the entry, when, the call, what was decided and why, the facts."""

    id: int
    at: datetime
    server: str
    tool: str
    decision: str
    reasons: list[str]
    why: str
    facts: str | None  # logic/recorded.py's encoding; None for a row written before facts were kept
    problem: str | None = None  # why the row cannot be read (edited outside groundstate): it is not re-decided


class Ledger:
    """The guard's decisions in the database at ``url`` (the configuration's ``store.url``)."""

    def __init__(self, url: str, audit_key: bytes | None = None) -> None:
        """``audit_key``: sign the store's chain head after every write (``[audit] sign``; store/audit.py)."""
        self.engine: Engine = open_engine(url)  # opened as the run store is: WAL, busy timeout, a private file
        create_tables(self.engine, decisions)
        self.chain = StoreChain(self.engine, audit_key)  # every write below is a link of the store's chain
        driver = DriverSQL(self.engine)  # a row per call: the driver's own SQL (``DriverSQL``: bench/mcp)
        self._record = driver.sql(
            "INSERT INTO mcp_decisions (at, call, server, tool, arguments, digest, client, decision, reasons, why, "
            "status, expires_at, waiter, account, policy, shadow, facts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
        )
        self._moment, self._time = driver.writer(decisions.c.at), driver.reader(decisions.c.at)
        self._joined = driver.sql(
            "SELECT id, status, at, expires_at, waiter FROM mcp_decisions WHERE digest = ? AND client = ? AND "
            f"decision = 'approve' AND status IN ('{HELD}', '{APPROVED}', '{DENIED}') AND answered IS NULL "
            "ORDER BY id DESC LIMIT 1"
        )

    def record(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        client: str,
        verdict: Any,
        hold_seconds: float,
        db: Executes | None = None,
        account: str | None = None,
    ) -> int:
        """Write the verdict on one call (a call that needs approval is held until ``hold_seconds`` from now), in
        ``db`` when the caller gives its transaction (it commits it)."""
        now = datetime.now(UTC)
        held = verdict.decision == "approve"
        expires = self._moment(now + timedelta(seconds=hold_seconds)) if held else None
        row = (self._moment(now), verdict.call, server, tool, json.dumps(arguments, sort_keys=True), verdict.digest,
               client, verdict.decision, json.dumps(verdict.reasons), verdict.why,
               HELD if held else verdict.decision, expires, this_process() if held else None, account,
               getattr(verdict, "policy", None) or None, _shadow(verdict),
               encode_facts(list(verdict.facts)) if getattr(verdict, "facts", None) else None)  # fmt: skip
        with within(self.engine, db) as writing:
            entry_id = int(writing.exec_driver_sql(self._record, row).scalar_one())
            self.chain.touch(writing, LEDGER, (entry_id,), "decided")
            return entry_id

    def decide(
        self,
        entry_id: int,
        approve: bool,
        operator: str,
        digest: str | None = None,
        self_approval: Collection[str] = (),
    ) -> Entry:
        """An operator's decision on a held call, once; ApprovalRefused says why it cannot apply — among the reasons,
        that ``operator`` made the call with their own token (``access.mg``: another account decides it, unless
        ``self_approval`` — the configuration's ``[access] self_approval`` — names them)."""
        now = datetime.now(UTC)
        with self.engine.begin() as db:
            current = self._get(db, entry_id)
            if current is None:
                raise UnknownCall(f"there is no call {entry_id} in the guard's ledger")
            self._untouched(db, entry_id, "decided")  # what the operator was shown is what groundstate held
            if digest is not None and digest != current.digest:
                raise ApprovalRefused(f"call {entry_id} is {current.digest}, not {digest}: a changed call needs its "
                                      "own approval")  # fmt: skip
            if current.status == HELD and _abandoned(current):
                self._end(db, entry_id, WITHDRAWN, "the guard process that held it stopped")
                current = self._get(db, entry_id) or current
            if current.status != HELD:
                said = f" ({current.ended})" if current.ended else ""
                raise ApprovalRefused(f"call {entry_id} is {current.status}{said}: only a held call can be decided")
            if current.expires_at is not None and aware(current.expires_at) <= now:
                raise ApprovalRefused(f"call {entry_id} expired at {current.expires_at:%H:%M:%S} UTC")
            refused = decision_refused(operator, current.account, self_approval)
            if refused is not None:
                raise ApprovalRefused(f"call {entry_id}: {refused}")
            db.execute(update(decisions).where(decisions.c.id == entry_id, decisions.c.status == HELD).values(
                status=APPROVED if approve else DENIED, operator=operator, decided_at=now))  # fmt: skip
            self.chain.touch(db, LEDGER, (entry_id,), "approved" if approve else "denied")
            found = self._get(db, entry_id)
        assert found is not None
        return found

    def _untouched(self, db: Any, entry_id: int, what: str) -> None:
        """RowChanged — the call is not ``what`` — unless its row is what its latest link in the store's chain
        recorded."""
        changed = self.chain.changed(db, LEDGER, (entry_id,))
        if changed is not None:
            raise RowChanged(f"call {entry_id} is not {what}: the ledger's {changed} (`groundstate audit verify` "
                             "names every change)")  # fmt: skip

    def park(self, entry_id: int) -> None:
        """Its client was told the call is held and to ask again: nobody waits for it in between, so no process's
        death withdraws it; it stays held until an operator decides or it expires."""
        with self.engine.begin() as db:
            db.execute(update(decisions).where(decisions.c.id == entry_id, decisions.c.status == HELD).values(
                waiter=None))  # fmt: skip

    def joined(self, digest: str, client: str, db: Executes | None = None) -> int | None:
        """The held call this identical call (same ``digest``, same ``client``) asks about again: the newest one
        still held and not expired, or decided by an operator and not yet answered; None when there is none."""
        with within(self.engine, db) as reading_:
            row = reading_.exec_driver_sql(self._joined, (digest, client)).first()
        if row is None or row[3] is None or (row[4] is not None and gone_here(row[4])):
            return None  # nothing to join, or its waiter died: it is withdrawn when listed or decided
        entry_id, status, at, expires = row[0], row[1], aware(self._time(row[2])), aware(self._time(row[3]))
        until = expires if status == HELD else expires + (expires - at)  # a decision waits as long as its call did
        return int(entry_id) if datetime.now(UTC) < until else None

    def answer(self, entry_id: int) -> bool:
        """Mark an operator's decision on the call as delivered to a client, once: False when another call (an
        identical one, concurrently) already took it — an approval runs one call, never two."""
        with self.engine.begin() as db:
            self._untouched(db, entry_id, "run")  # a decision groundstate recorded, on a call it held
            done = db.execute(update(decisions).where(decisions.c.id == entry_id, decisions.c.answered.is_(None),
                                                      decisions.c.status.in_((APPROVED, DENIED)))
                              .values(answered=datetime.now(UTC)))  # fmt: skip
            if done.rowcount == 1:
                self.chain.touch(db, LEDGER, (entry_id,), "answered")
        return bool(done.rowcount == 1)

    def expire(self, entry_id: int) -> None:
        """The guard stopped waiting: a call still held is expired (and can no longer be approved)."""
        with self.engine.begin() as db:
            self._end(db, entry_id, EXPIRED, "no operator decided before it expired")

    def withdraw(self, entry_id: int, why: str) -> None:
        """Nobody waits for the call any more (its client cancelled it or went away): a call still held is
        withdrawn, with why, and can no longer be decided."""
        with self.engine.begin() as db:
            self._end(db, entry_id, WITHDRAWN, why)

    def waiting(self, limit: int = 200) -> list[Entry]:
        """The held calls an operator can still decide: each one's waiter alive and its time not up. Those whose
        waiter is gone are withdrawn on the way, those past their time expired — never offered for approval."""
        now = datetime.now(UTC)
        live = []
        for entry in self.entries(HELD, limit):
            if entry.status == UNREADABLE:  # cannot be decided; `approvals list --all` and the console show it
                continue
            if _abandoned(entry):
                self.withdraw(entry.id, "the guard process that held it stopped")
            elif entry.expires_at is not None and aware(entry.expires_at) <= now:
                self.expire(entry.id)
            else:
                live.append(entry)
        return live

    def _end(self, db: Any, entry_id: int, status: str, why: str) -> None:
        done = db.execute(update(decisions).where(decisions.c.id == entry_id, decisions.c.status == HELD).values(
            status=status, ended=why, decided_at=datetime.now(UTC)))  # fmt: skip
        if done.rowcount == 1:
            self.chain.touch(db, LEDGER, (entry_id,), status)

    def get(self, entry_id: int) -> Entry | None:
        """One entry, or None."""
        with reading(self.engine) as db:
            return self._get(db, entry_id)

    def recorded(self, since: datetime | None = None, server: str | None = None) -> list[Recorded]:
        """Every decision with what it was decided from, oldest first (``since``: at or after; ``server``: its
        calls only): what ``policy replay`` re-decides. Rows written before facts were kept have ``facts`` None; a
        row that cannot be read (edited outside groundstate) has ``problem`` saying why, in its place."""
        raw_at = type_coerce(decisions.c.at, Text)  # read as stored, parsed per row: one bad row is said, not fatal
        query = select(decisions.c.id, raw_at, decisions.c.server, decisions.c.tool, decisions.c.decision,
                       decisions.c.reasons, decisions.c.why, decisions.c.facts).order_by(decisions.c.id)  # fmt: skip
        if since is not None:
            query = query.where(decisions.c.at >= since)
        if server is not None:
            query = query.where(decisions.c.server == server)
        with reading(self.engine) as db:
            rows = list(db.execute(query))
        return [self._recorded(row) for row in rows]

    def _recorded(self, row: Any) -> Recorded:
        entry_id, at, row_server, tool, decision, reasons, why, facts = row
        try:
            moment = aware(self._time(at))
            said = json.loads(reasons)
            if not isinstance(moment, datetime) or not isinstance(said, list):
                raise ValueError("not a time and a list of reasons")
            return Recorded(entry_id, moment, str(row_server), str(tool), str(decision), [str(r) for r in said],
                            str(why), facts if isinstance(facts, str) or facts is None else str(facts))  # fmt: skip
        except (ValueError, TypeError, AttributeError) as exc:
            return Recorded(entry_id, datetime.min.replace(tzinfo=UTC), str(row_server), str(tool), str(decision), [],
                            "", None, f"the row cannot be read ({exc})")  # fmt: skip

    def disagreements(self) -> Counter[tuple[str, str]]:
        """How many calls the shadow policy ([mcp] shadow) would have decided otherwise, by (decision, shadow's)."""
        counted: Counter[tuple[str, str]] = Counter()
        query = select(decisions.c.decision, decisions.c.shadow).where(decisions.c.shadow.is_not(None))
        with reading(self.engine) as db:
            for decision, shadow in db.execute(query):
                would = json.loads(shadow).get("decision")
                if would != decision:
                    counted[(decision, str(would))] += 1
        return counted

    def entries(self, status: str | None = None, limit: int = 200) -> list[Entry]:
        """The latest entries (held ones only with ``status="held"``), newest first. An entry whose row cannot be
        read (changed outside groundstate: bytes that are not UTF-8, arguments that are not JSON, a date that is no
        date) is listed in its place with the status ``unreadable`` and why — one damaged row never hides the
        others (the rows are read one by one only when reading them at once fails)."""
        query = select(decisions).order_by(decisions.c.id.desc()).limit(limit)
        if status is not None:
            query = query.where(decisions.c.status == status)
        with reading(self.engine) as db:
            try:
                return [_entry(row) for row in db.execute(query).mappings()]
            except _UNREADABLE:
                pass
            found = []
            for entry_id in db.execute(query.with_only_columns(decisions.c.id)).scalars():
                try:
                    found.append(_entry(db.execute(select(decisions).where(decisions.c.id == entry_id)).mappings()
                                        .one()))  # fmt: skip
                except _UNREADABLE as exc:
                    found.append(_unreadable(entry_id, exc))
            return found

    @staticmethod
    def _get(db: Any, entry_id: int) -> Entry | None:
        row = db.execute(select(decisions).where(decisions.c.id == entry_id)).mappings().first()
        return None if row is None else _entry(row)


_UNREADABLE = (StoreError, ValueError, TypeError, KeyError, AttributeError)  # a row groundstate did not write


def _unreadable(entry_id: int, exc: Exception) -> Entry:
    """The listing of an entry whose row cannot be read: its id, the status ``unreadable``, and why."""
    why = str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
    return Entry(entry_id, datetime.fromtimestamp(0, UTC), None, "", "", {}, "", "", "", [],
                 f"this entry cannot be read ({why[:300]}); the store was changed outside groundstate", UNREADABLE,
                 None, None)  # fmt: skip


def _entry(row: Any) -> Entry:
    return Entry(row["id"], aware(row["at"]), row["call"], row["server"], row["tool"], json.loads(row["arguments"]),
                 row["digest"], row["client"], row["decision"], json.loads(row["reasons"]), row["why"], row["status"],
                 aware(row["expires_at"]) if row["expires_at"] else None, row["operator"], row["ended"],
                 row["waiter"], row["account"], row["policy"],
                 json.loads(row["shadow"]) if row["shadow"] else None)  # fmt: skip


def _shadow(verdict: Any) -> str | None:
    """What the shadow policy would have decided, as the ledger keeps it (None without a shadow policy)."""
    shadow = getattr(verdict, "shadow", None)
    return json.dumps({"decision": shadow[0], "reasons": shadow[1]}) if shadow is not None else None


def _abandoned(entry: Entry) -> bool:
    """Whether the guard process holding ``entry`` is certainly gone (same host, that process no longer runs)."""
    return entry.waiter is not None and gone_here(entry.waiter)
