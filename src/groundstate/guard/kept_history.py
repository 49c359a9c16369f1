"""What a stdio client's session was told, kept in the store so that the client's next guard process continues it.

Provenance is per session, and a session lived in one guard process. A client that starts a guard per call —
``langchain-mcp-adapters``' ``client.get_tools()`` without a session does, over stdio — gave every call an empty
history while its model remembered what it read: an email's address read by one call and sent to by the next was
tied to nothing. So a stdio guard keeps its session's declared requests and results here, under the client process
that started it (its parent, ``host:pid:start``), and a guard the same process starts later resumes them. Two
conversations of one client process share a history: stricter, never looser. Rows of a client process that no
longer runs are removed when a guard starts.

Bounded as the session in memory is (``[mcp] history_calls`` results and ``history_bytes`` of their text, the oldest
removed first, at most ``TRIM_EVERY`` results late; the session resumed from them is marked when any were). A row
that cannot be read (edited outside groundstate) is left out and marks the session: what it said is unseen, so the
rules get stricter.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Column, Engine, Integer, MetaData, String, Table, Text

from ..logic import RecordedFactsError, decode_facts, encode_facts
from ..provenance import Kept
from ..store import DriverSQL, Executes, create_tables, gone_here, reading, within

MAX_REQUESTS = 100  # declared requests kept per client (the session keeps their last 100,000 characters)
# The oldest results past the bounds are removed every TRIM_EVERY results, or once a quarter of the bytes' bound was
# added: a trim costs more than the insert (~0.1 ms against ~0.03), and a session resumed from a few results more
# than the bounds drops them as it loads, marked just as the session in memory was when it dropped them.
TRIM_EVERY = 16
PREFIX = "stdio:"  # a kept session's key: this, then the client process

_TABLES = MetaData()
kept_rows = Table(
    "mcp_history", _TABLES,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session", String(200), nullable=False, index=True),
    Column("kind", String(8), nullable=False),  # "result"; "request" (a declared request, in ``text``); "pending"
    # (a forwarded call whose result is to come: its ledger entry in ``number``)
    Column("number", Integer, nullable=False),  # a result's place in the session that kept it
    Column("call", String(40), nullable=False),
    Column("server", String(200), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("text", Text, nullable=False),  # a result's text as kept (case-folded), or the request
    Column("size", Integer, nullable=False),  # characters of ``text``: what the bound counts
    Column("fields", Text, nullable=False),  # the structured data, {datum: count}
    Column("origins", Text, nullable=False),  # where the call's own arguments came from (facts)
    Column("marked", Integer, nullable=False),  # the session was marked by then
)  # fmt: skip


class KeptHistory:
    """The kept sessions of stdio clients, in the store's database (the ledger's engine)."""

    TRIM_EVERY = TRIM_EVERY

    def __init__(self, engine: Engine, max_calls: int, max_bytes: int) -> None:
        self.engine, self.max_calls, self.max_bytes = engine, max_calls, max_bytes
        self._untrimmed: dict[str, tuple[int, int]] = {}  # per session: results and characters since the last trim
        create_tables(engine, kept_rows)
        sql = DriverSQL(engine).sql
        self._insert = sql("INSERT INTO mcp_history (session, kind, number, call, server, tool, text, size, fields, "
                           "origins, marked) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")  # fmt: skip
        # the oldest results past either bound, as the session in memory drops them (the newest counted first)
        self._trim = sql("DELETE FROM mcp_history WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER (ORDER "
                         "BY id DESC) AS place, SUM(size) OVER (ORDER BY id DESC ROWS UNBOUNDED PRECEDING) AS total "
                         "FROM mcp_history WHERE session = ? AND kind <> 'request') AS newest WHERE place > ? OR "
                         "total > ?) RETURNING id")  # fmt: skip
        self._trim_requests = sql("DELETE FROM mcp_history WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() "
                                  "OVER (ORDER BY id DESC) AS place FROM mcp_history WHERE session = ? AND kind = "
                                  "'request') AS newest WHERE place > ?)")  # fmt: skip
        self._load = sql("SELECT kind, number, call, server, tool, text, fields, origins, marked FROM mcp_history "
                         "WHERE session = ? ORDER BY id")  # fmt: skip
        self._settled = sql("DELETE FROM mcp_history WHERE session = ? AND kind = 'pending' AND number = ?")
        self._sessions = sql("SELECT DISTINCT session FROM mcp_history")
        self._forget = sql("DELETE FROM mcp_history WHERE session = ?")

    def load(self, session: str) -> tuple[list[str], list[Kept], bool]:
        """The session's declared requests and results, oldest first, within the bounds (the older removed now), and
        whether something it was told is unseen: results removed for the bounds, or a row that cannot be read."""
        requests: list[str] = []
        parts: list[Kept] = []
        with within(self.engine, None) as db:
            unreadable = bool(list(db.exec_driver_sql(self._trim, (session, self.max_calls, self.max_bytes))))
            rows = list(db.exec_driver_sql(self._load, (session,)))
        for kind, number, call, server, tool, text, fields, origins, marked in rows:
            try:
                if kind == "request" and isinstance(text, str):
                    requests.append(text)
                    continue
                if kind == "pending":  # a result the client read and no guard kept: unseen
                    unreadable = True
                    continue
                parts.append(Kept(int(number), str(call), str(server), str(tool), _text(text), _fields(fields),
                                  tuple(decode_facts(origins)), bool(marked)))  # fmt: skip
            except (TypeError, ValueError, RecordedFactsError):
                unreadable = True
        return requests, parts, unreadable

    def request(self, session: str, text: str, db: Executes | None = None) -> None:
        """A request the client declared, kept (in ``db``, the caller's transaction, when given)."""
        with within(self.engine, db) as db:
            db.exec_driver_sql(self._insert, (session, "request", 0, "", "", "", text, len(text), "{}", "[]", 0))
            db.exec_driver_sql(self._trim_requests, (session, MAX_REQUESTS))

    def pending(self, session: str, entry: int, db: Executes | None = None) -> None:
        """A call is forwarded (the guard's ledger entry ``entry``): its result is to come (``result``). Written
        with the call's intent, before the effect: a guard that dies before it keeps the result leaves this row,
        and the session resumed from it is marked — the client's model read a result the next guard cannot see."""
        with within(self.engine, db) as db:
            db.exec_driver_sql(self._insert, (session, "pending", entry, "", "", "", "", 0, "{}", "[]", 0))

    def result(self, session: str, part: Kept, db: Executes | None = None, entry: int | None = None) -> None:
        """A result the session kept, kept here too (in place of its call's ``pending`` row, when ``entry``
        names one), and the oldest past the bounds removed."""
        row = (session, "result", part.number, part.call, part.server, part.tool, part.text, len(part.text),
               json.dumps(part.fields, ensure_ascii=False), encode_facts(list(part.origins)), int(part.marked))
        calls, size = self._untrimmed.get(session, (0, 0))
        calls, size = calls + 1, size + len(part.text)
        with within(self.engine, db) as db:
            if entry is not None:
                db.exec_driver_sql(self._settled, (session, entry))
            db.exec_driver_sql(self._insert, row)
            if calls >= self.TRIM_EVERY or size > self.max_bytes // 4:
                db.exec_driver_sql(self._trim, (session, self.max_calls, self.max_bytes))
                calls, size = 0, 0
        self._untrimmed[session] = (calls, size)

    def forget_gone(self) -> int:
        """Remove the kept sessions of client processes that no longer run on this host; how many."""
        with reading(self.engine) as db:
            sessions = [str(session) for (session,) in db.exec_driver_sql(self._sessions)]
        gone = [session for session in sessions if session.startswith(PREFIX) and gone_here(session[len(PREFIX):])]
        with within(self.engine, None) as db:
            for session in gone:
                db.exec_driver_sql(self._forget, (session,))
        return len(gone)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("a kept result's text is not text")
    return value


def _fields(value: Any) -> dict[str, int]:
    found = json.loads(value)
    if not isinstance(found, dict) or not all(isinstance(k, str) and type(v) is int for k, v in found.items()):
        raise ValueError("a kept result's data is not {datum: count}")
    return found
