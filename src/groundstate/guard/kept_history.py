"""What a stdio client's session was told, kept in the store so that the client's next guard process continues it.

Provenance is per session, and a session lived in one guard process. A client that starts a guard per call —
``langchain-mcp-adapters``' ``client.get_tools()`` without a session does, over stdio — gave every call an empty
history while its model remembered what it read: an email's address read by one call and sent to by the next was
tied to nothing. So a stdio guard keeps its session's results here, under the client process that started it (its
parent: host, PID namespace, pid and start time), and a guard the same process starts later resumes them. Two
conversations of one client process share the results (stricter, never looser); the requests a client declares are
not kept — a request names values as the user's, and one conversation's must not vouch for another's.

A result is kept before the client reads it, and a forwarded call's place is written with its intent, before the
effect: a guard that dies during the call leaves the place empty, and the session resumed from it is marked. A guard
whose parent cannot be told apart (pid 0 or 1: it is its PID namespace's first process, as in ``docker run -i``, or
was left to init; no ``/proc``) keeps nothing. Bounded as the session in memory is (``[mcp] history_calls`` results
and ``history_bytes`` of their text and data, the oldest removed first, at most ``TRIM_EVERY`` results late; the
session resumed from them is marked when any were). A row that cannot be read, or that says more than where its own
call's arguments came from (edited outside groundstate), marks the session. Rows of a client process that no longer
runs are removed when a guard in its PID namespace on its host starts; rows this guard cannot check (another host,
another PID namespace) once they are ``MAX_IDLE_SEC`` old.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from sqlalchemy import Column, Engine, Integer, MetaData, Table, Text

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
RESULT, PENDING = "result", "pending"

_TABLES = MetaData()
kept_rows = Table(
    "mcp_history", _TABLES,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session", Text, nullable=False, index=True),
    Column("kind", Text, nullable=False),  # "result"; "pending" (a forwarded call's place: its ledger entry in number)
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
        sql = DriverSQL(engine).sql
        self._insert = sql("INSERT INTO mcp_history (session, kind, number, call, server, tool, text, size, fields, "
                           "origins, marked, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")  # fmt: skip
        # the oldest past either bound, as the session in memory drops them (the newest counted first)
        self._trim = sql("DELETE FROM mcp_history WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER (ORDER "
                         "BY id DESC) AS place, SUM(size) OVER (ORDER BY id DESC ROWS UNBOUNDED PRECEDING) AS total "
                         "FROM mcp_history WHERE session = ?) AS newest WHERE place > ? OR total > ?) RETURNING id")
        self._load = sql("SELECT kind, number, call, server, tool, text, fields, origins, marked FROM mcp_history "
                         "WHERE session = ? ORDER BY id")  # fmt: skip
        self._settled = sql("DELETE FROM mcp_history WHERE session = ? AND kind = 'pending' AND number = ?")
        self._sessions = sql("SELECT session, MAX(at) FROM mcp_history GROUP BY session")
        self._forget = sql("DELETE FROM mcp_history WHERE session = ?")

    def load(self, session: str) -> tuple[list[Kept], bool]:
        """The session's results, oldest first, within the bounds (the older removed now), and whether something it
        was told is unseen: results removed for the bounds, a call whose result no guard kept, or a row that cannot
        be read."""
        parts: list[Kept] = []
        with within(self.engine, None) as db:
            unseen = bool(list(db.exec_driver_sql(self._trim, (session, self.max_calls, self.max_bytes))))
            rows = list(db.exec_driver_sql(self._load, (session,)))
        for kind, number, call, server, tool, text, fields, origins, marked in rows:
            try:
                if kind != RESULT:  # a forwarded call's place whose result no guard kept: the client may have read it
                    raise ValueError(f"a {kind!r} row")
                parts.append(Kept(int(number), _text(call), _text(server), _text(tool), _text(text), _fields(fields),
                                  tuple(decode_facts(_text(origins))), bool(marked)))  # fmt: skip
            except (TypeError, ValueError, OverflowError, RecursionError, RecordedFactsError):
                unseen = True
        return parts, unseen

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
        fields = json.dumps(part.fields, ensure_ascii=False)
        size = len(part.text) + len(fields)
        row = (session, RESULT, part.number, part.call, part.server, part.tool, part.text, size, fields,
               encode_facts(list(part.origins)), int(part.marked), int(time.time()))  # fmt: skip
        calls, added = self._untrimmed.get(session, (0, 0))
        calls, added = calls + 1, added + size
        with within(self.engine, db) as db:
            if entry is not None:
                db.exec_driver_sql(self._settled, (session, entry))
            db.exec_driver_sql(self._insert, row)
            if calls >= self.TRIM_EVERY or added > self.max_bytes // 4:
                db.exec_driver_sql(self._trim, (session, self.max_calls, self.max_bytes))
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


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("a kept value is not text")
    return value


def _fields(value: Any) -> dict[str, int]:
    found = safejson.loads(_text(value))
    if not isinstance(found, dict) or not all(isinstance(k, str) and type(v) is int for k, v in found.items()):
        raise ValueError("a kept result's data is not {datum: count}")
    return found
