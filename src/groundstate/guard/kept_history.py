"""What clients were told, kept in the store: a stdio client's session for its next guard process, and the shared
histories other guards catch up on (an HTTP account's, one the operator named: shared_histories.py).

Provenance is per session, and a session lived in one guard process. A client that starts a guard per call —
``langchain-mcp-adapters``' ``client.get_tools()`` without a session does, over stdio — gave every call an empty
history while its model remembered what it read: an email's address read by one call and sent to by the next was
tied to nothing. So a stdio guard keeps its session's results here, under the client process that started it (its
parent: host, PID namespace, pid and start time), and a guard the same process starts later resumes them. Two
conversations of one client process share the results (stricter, never looser); the requests a client declares are
not kept — a request names values as the user's, and one conversation's must not vouch for another's.

A result is kept before the client reads it, and a forwarded call's place is written with its intent, before the effect:
a guard that dies during the call leaves the place empty, and the session resumed from it is marked. A guard whose
parent cannot be told apart (pid 0 or 1: it is its PID namespace's first process, as in ``docker run -i``, or was left
to init; no ``/proc``) keeps nothing of its own (``mcp serve --history NAME`` names one it shares). Bounded as the
session in memory is (``[mcp] history_calls`` results and ``history_bytes`` of their text and data, the oldest removed
first, at most ``TRIM_EVERY`` results late; the session resumed from them is marked when any were). A row that cannot be
read, or that says more than where its own call's arguments came from (edited outside groundstate), marks the session.
Rows of a client process that no longer runs are removed when a guard in its PID namespace on its host starts; rows this
guard cannot check (another host, another PID namespace) once they are ``MAX_IDLE_SEC`` old.

Every trim leaves a ``lost`` row saying up to which id rows were removed, so that a guard which had not read them, and
every guard started later, is marked; a result larger than the bytes' bound alone is kept cut, marked. On SQLite the
table never gives an id again (AUTOINCREMENT), so a row committed later always has a larger id.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Engine, Integer, MetaData, Table, Text
from sqlalchemy.schema import CreateIndex, CreateTable

from .. import safejson
from ..logic import RecordedFactsError, decode_facts, encode_facts
from ..provenance import Kept
from ..store import DriverSQL, Executes, create_tables, gone_here, parent_process, reading, within

PREFIX = "stdio:"  # a kept session's key: this, the client's PID namespace, then the client process (host:pid:start)
# The oldest results past the bounds are removed every TRIM_EVERY results, or once a quarter of the bytes' bound was
# added: a trim costs more than the insert (~0.1 ms against ~0.03), and a session resumed from a few results more
# than the bounds drops them as it loads, marked just as the session in memory was when it dropped them.
TRIM_EVERY = 16
MAX_IDLE_SEC = 7 * 24 * 3600  # a kept session no guard here can check is removed after a week without a write
RESULT, PENDING, LOST = "result", "pending", "lost"

@dataclass(frozen=True)
class Held:
    """The kept rows of a session a guard holds: on SQLite those up to ``after`` (rows commit in the order of their
    ids), on PostgreSQL the result rows ``ids``."""

    after: int
    ids: frozenset[int]


_TABLES = MetaData()
kept_rows = Table(
    "mcp_history", _TABLES,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session", Text, nullable=False, index=True),
    Column("kind", Text, nullable=False),  # "result"; "pending" (a forwarded call's place: its ledger entry in number);
    # "lost" (rows were removed for the bounds: the largest id removed in number; one per session, the newest)
    Column("number", Integer, nullable=False),  # a result's place in the session that kept it
    Column("call", Text, nullable=False),
    Column("server", Text, nullable=False),
    Column("tool", Text, nullable=False),
    Column("text", Text, nullable=False),  # the result's text as kept (case-folded)
    Column("size", Integer, nullable=False),  # characters of the text and the data: what the bytes' bound counts
    Column("fields", Text, nullable=False),  # the structured data, {datum: count}
    Column("origins", Text, nullable=False),  # where the call's own arguments came from (facts)
    Column("marked", Integer, nullable=False),  # the session was marked by then
    Column("at", Integer, nullable=False),  # when it was written (seconds since the epoch)
    sqlite_autoincrement=True,  # an id is never used again, even once its row is removed (catch_up relies on it)
)  # fmt: skip


def client_key() -> str | None:
    """The kept session of the client process that started this guard, or None when that process cannot be told
    apart from others (see the module's docstring)."""
    if os.getppid() <= 1:
        return None
    holder = parent_process()  # host:pid:start
    namespace = _pid_namespace()
    if holder.endswith(":?") or namespace is None:
        return None
    return f"{PREFIX}{namespace}:{holder}"


def _pid_namespace() -> str | None:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return None


class KeptHistory:
    """The kept sessions of stdio clients, in the store's database (the ledger's engine)."""

    TRIM_EVERY = TRIM_EVERY

    def __init__(self, engine: Engine, max_calls: int, max_bytes: int) -> None:
        self.engine, self.max_calls, self.max_bytes = engine, max_calls, max_bytes
        self._untrimmed: dict[str, tuple[int, int]] = {}  # per session: results and characters since the last trim
        create_tables(engine, kept_rows)
        _never_reusing_ids(engine)
        sql = DriverSQL(engine).sql
        self._insert = sql("INSERT INTO mcp_history (session, kind, number, call, server, tool, text, size, fields, "
                           "origins, marked, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")  # fmt: skip
        # the oldest past either bound, as the session in memory drops them (the newest counted first); what was
        # removed is said by a "lost" row, so that a guard which had not read them yet knows something is unseen
        self._trim = sql("DELETE FROM mcp_history WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER (ORDER "
                         "BY id DESC) AS place, SUM(size) OVER (ORDER BY id DESC ROWS UNBOUNDED PRECEDING) AS total "
                         "FROM mcp_history WHERE session = ? AND kind <> 'lost') AS newest WHERE place > ? OR "
                         "total > ?) RETURNING id")  # fmt: skip
        self._unlost = sql("DELETE FROM mcp_history WHERE session = ? AND kind = 'lost'")
        self._load = sql("SELECT kind, number, call, server, tool, text, fields, origins, marked FROM mcp_history "
                         "WHERE session = ? ORDER BY id")  # fmt: skip
        self._ids = sql("SELECT id, kind, call, number, size FROM mcp_history WHERE session = ? AND id > ? "
                        "ORDER BY id")  # fmt: skip
        self._since = sql("SELECT id, kind, number, call, server, tool, text, fields, origins, marked FROM "
                          "mcp_history WHERE session = ? AND kind = 'result' AND id >= ? ORDER BY id")  # fmt: skip
        # SQLite commits one writer at a time, and the table's ids are never used again (AUTOINCREMENT, see
        # _never_reusing_ids), so a row committed later has a larger id: a guard reads only the ids past the last
        # result it read. PostgreSQL takes ids before commits, which may then come in another order: a guard reads
        # all of a session's ids (a few hundred small rows) and compares them with those it holds.
        self._in_order = engine.dialect.name == "sqlite"
        self._settled = sql("DELETE FROM mcp_history WHERE session = ? AND kind = 'pending' AND number = ?")
        self._sessions = sql("SELECT session, MAX(at) FROM mcp_history GROUP BY session")
        self._forget = sql("DELETE FROM mcp_history WHERE session = ?")

    def load(self, session: str) -> tuple[list[Kept], bool]:
        """The session's results, oldest first, within the bounds (the older removed now), and whether something it
        was told is unseen: results removed for the bounds, a call whose result no guard kept, or a row that cannot
        be read."""
        with within(self.engine, None) as db:
            self._trimmed(db, session)
            rows = list(db.exec_driver_sql(self._load, (session,)))  # a "lost" row among them marks, as a pending one
        return _parts(rows)

    def catch_up(self, session: str, held: Held | None, own: Callable[[str], bool],
                 most: int | None = None) -> tuple[list[Kept], Held, bool] | None:  # fmt: skip
        """What ``session`` kept that a guard which holds ``held`` of its rows (None: none yet) lacks — kept by
        another guard on this store, or by an earlier process: the new results, oldest first (those of calls ``own``
        says the guard kept itself left out); what the guard then holds; whether something is unseen. On a first
        read that is what ``load`` says (results past the bounds, a call whose result no guard kept, a row that
        cannot be read); later, results removed for the bounds before the guard read them, or a row that cannot be
        read — another guard's call whose result is not kept yet is still in flight, and its result is read once it
        is. None, with nothing read, when the new results hold more than ``most`` characters (a caller on the event
        loop reads them in a worker thread instead)."""
        first = held is None
        with within(self.engine, None) if first else reading(self.engine) as db:
            after = held.after if held is not None and self._in_order else 0
            if first:  # (what it removes is said by a "lost" row, read below)
                self._trimmed(db, session)
            listed = db.exec_driver_sql(self._ids, (session, after))
            rows = [(int(row_id), kind, call, number, size) for row_id, kind, call, number, size in listed]
            results = {row_id for row_id, kind, _, _, _ in rows if kind == RESULT}
            read_up_to = held.after if held is not None else 0  # the newest result this guard read
            lost = [number for _, kind, _, number, _ in rows if kind == LOST]
            unseen = (first and len(results) < len(rows)) or any(number > read_up_to for number in lost)
            new = {row_id: size for row_id, kind, call, _, size in rows
                   if kind == RESULT and not (held and row_id in held.ids) and not own(call)}  # fmt: skip
            if most is not None and sum(size if isinstance(size, int) else most + 1 for size in new.values()) > most:
                return None
            found = list(db.exec_driver_sql(self._since, (session, min(new)))) if new else []
        parts, unreadable = _parts([row for row_id, *row in found if int(row_id) in new])
        up_to = max(results, default=held.after if held is not None else 0)
        return parts, Held(up_to, frozenset() if self._in_order else frozenset(results)), unseen or unreadable

    def _trimmed(self, db: Executes, session: str) -> None:
        """The oldest rows past the bounds removed, and said by the session's "lost" row (the largest id removed)."""
        removed = [int(row_id) for (row_id,) in db.exec_driver_sql(self._trim, (session, self.max_calls,
                                                                                self.max_bytes))]  # fmt: skip
        if removed:
            db.exec_driver_sql(self._unlost, (session,))
            db.exec_driver_sql(self._insert, (session, LOST, max(removed), "", "", "", "", 0, "{}", "[]", 1,
                                              int(time.time())))  # fmt: skip

    def pending(self, session: str, entry: int, db: Executes | None = None) -> None:
        """A call is forwarded (the guard's ledger entry ``entry``): its result is to come (``result``). Written
        with the call's intent, before the effect: a guard that dies before it keeps the result leaves this row,
        and the session resumed from it is marked."""
        with within(self.engine, db) as db:
            db.exec_driver_sql(self._insert, (session, PENDING, entry, "", "", "", "", 0, "{}", "[]", 0,
                                              int(time.time())))  # fmt: skip

    def result(self, session: str, part: Kept, db: Executes | None = None, entry: int | None = None) -> None:
        """A result the session kept, kept here too (in place of its call's ``pending`` row, when ``entry`` names
        one), and the oldest past the bounds removed."""
        fields, text, marked = json.dumps(part.fields, ensure_ascii=False), part.text, part.marked
        if len(text) + len(fields) > self.max_bytes:  # alone past the bytes' bound: what fits is kept, marked (found
            fields = "{}" if len(fields) > self.max_bytes // 2 else fields  # by an attack: the row was removed by
            text, marked = text[: self.max_bytes - len(fields)], True  # its own trim, and nothing said so)
        size = len(text) + len(fields)
        row = (session, RESULT, part.number, part.call, part.server, part.tool, text, size, fields,
               encode_facts(list(part.origins)), int(marked), int(time.time()))  # fmt: skip
        calls, added = self._untrimmed.get(session, (0, 0))
        calls, added = calls + 1, added + size
        with within(self.engine, db) as db:
            if entry is not None:
                db.exec_driver_sql(self._settled, (session, entry))
            db.exec_driver_sql(self._insert, row)
            if calls >= self.TRIM_EVERY or added > self.max_bytes // 4:
                self._trimmed(db, session)
                calls, added = 0, 0
        self._untrimmed[session] = (calls, added)

    def forget_gone(self) -> int:
        """Remove the kept sessions of client processes that no longer run (in this guard's PID namespace, on this
        host), and those this guard cannot check that no guard wrote for ``MAX_IDLE_SEC``; how many."""
        namespace = _pid_namespace()
        now = time.time()
        with reading(self.engine) as db:
            sessions = [(str(session), latest) for session, latest in db.exec_driver_sql(self._sessions)]
        gone = []
        for session, latest in sessions:
            space, _, holder = session.removeprefix(PREFIX).partition(":")
            checkable = session.startswith(PREFIX) and namespace is not None and space == namespace
            if gone_here(holder) if checkable else (isinstance(latest, int) and now - latest > MAX_IDLE_SEC):
                gone.append(session)
        with within(self.engine, None) as db:
            for session in gone:
                db.exec_driver_sql(self._forget, (session,))
        return len(gone)


def _never_reusing_ids(engine: Engine) -> None:
    """On SQLite, the table made to never use an id again. Without AUTOINCREMENT, SQLite gives a new row one past
    the largest id there is — the id of a row just removed, when it was the largest (found by an attack: a guard with
    smaller bounds removed every row of a history, the next result took an id below what a running guard had read,
    and that guard never saw it). A table an earlier release created without it is rebuilt with it, its rows and
    their ids kept, in one transaction; guards starting at once rebuild it once. A guard that finds it made so
    takes no write lock (a guard per call starts often)."""
    if engine.dialect.name != "sqlite":
        return
    made = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'mcp_history'"
    with reading(engine) as db:
        if _never_reuses(db.exec_driver_sql(made).first()):
            return
    with within(engine, None) as db:
        if _never_reuses(db.exec_driver_sql(made).first()):  # another guard rebuilt it meanwhile
            return
        columns = ", ".join(column.name for column in kept_rows.columns)
        db.exec_driver_sql("ALTER TABLE mcp_history RENAME TO mcp_history_reusing_ids")
        db.exec_driver_sql(str(CreateTable(kept_rows).compile(dialect=engine.dialect)))
        db.exec_driver_sql(f"INSERT INTO mcp_history ({columns}) SELECT {columns} FROM mcp_history_reusing_ids")
        db.exec_driver_sql("DROP TABLE mcp_history_reusing_ids")  # with its index
        for index in kept_rows.indexes:
            db.exec_driver_sql(str(CreateIndex(index).compile(dialect=engine.dialect)))


def _never_reuses(made: Any) -> bool:
    """Whether the table's definition (a row of ``sqlite_master``; None: no table) gives no id again."""
    return made is None or "AUTOINCREMENT" in str(made[0]).upper()


def _parts(rows: list[Any]) -> tuple[list[Kept], bool]:
    """The results among kept rows, oldest first, and whether any row is none (see ``_part``)."""
    parts = [_part(*row) for row in rows]
    return [part for part in parts if part is not None], None in parts


def _part(kind: Any, number: Any, call: Any, server: Any, tool: Any, text: Any, fields: Any, origins: Any,
          marked: Any) -> Kept | None:  # fmt: skip
    """A kept row read back, or None when it is no result (a forwarded call's place whose result no guard kept:
    the client may have read it; a "lost" row: results were removed for the bounds) or cannot be read."""
    try:
        if kind != RESULT:
            raise ValueError(f"a {kind!r} row")
        return Kept(int(number), _text(call), _text(server), _text(tool), _text(text), _fields(fields),
                    tuple(decode_facts(_text(origins))), bool(marked))  # fmt: skip
    except (TypeError, ValueError, OverflowError, RecursionError, RecordedFactsError):
        return None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("a kept value is not text")
    return value


def _fields(value: Any) -> dict[str, int]:
    found = safejson.loads(_text(value))
    if not isinstance(found, dict) or not all(isinstance(k, str) and type(v) is int for k, v in found.items()):
        raise ValueError("a kept result's data is not {datum: count}")
    return found
