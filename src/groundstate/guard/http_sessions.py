"""Which operator account opened each MCP session of the guard's HTTP transport, so a request naming a session is
let through only for the account that opened it, and only while it is open.

The `mcp` SDK keeps its own sessions but checks no owner, and on MCP's 2026 path it checks no session id at all;
the id also names the conversation whose declared request vouches for its calls (callers.py). So the transport
reads the id once, the way the SDK will (the first ``mcp-session-id`` header — a request with two is refused: the
guard read the last and the SDK the first, and an attack's request passed the guard as its own session and ran in
another account's), and keeps what it learnt from the SDK's answers:

- an id is noted as its account's only from a successful answer (a 2xx): the SDK hands out an id with a 400 too,
  for a session it then throws away, and 10,000 such answers pushed a live session out of the table;
- each account's ids are bounded on their own (``MAX_PER_ACCOUNT`` by default, the least recently used forgotten
  first), so one account opening sessions forgets only its own;
- a session ended by DELETE is forgotten."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..errors import AccessError, GroundstateError, InputError, NotFoundError

MAX_PER_ACCOUNT = 10_000  # sessions an account may have known at once (the SDK's own limit for all: 10,000 open)
SESSION_HEADER = b"mcp-session-id"


class UnknownSession(NotFoundError):
    """A request names an MCP session this guard did not open, or one that ended (MCP: the client opens another)."""


class TwoSessionIds(InputError):
    """A request carries more than one ``mcp-session-id`` header."""


class SessionOwners:
    """The accounts of the open sessions, each account's kept in the order they were last used."""

    def __init__(self, max_per_account: int = MAX_PER_ACCOUNT) -> None:
        self.max_per_account = max_per_account
        self._owner: dict[bytes, str] = {}
        self._by_account: dict[str, OrderedDict[bytes, None]] = {}

    def session_of(self, headers: list[tuple[bytes, bytes]]) -> bytes | None:
        """The session id a request names (None: no session); ``TwoSessionIds`` when it names more than one."""
        found = [value for name, value in headers if name.lower() == SESSION_HEADER]
        if len(found) > 1:
            raise TwoSessionIds("a request names at most one MCP session (one mcp-session-id header)")
        return found[0] if found else None

    def check(self, session: bytes, account: str) -> GroundstateError | None:
        """Why ``account`` may not use ``session`` (None: it may, and the session is now its most recently used)."""
        owner = self._owner.get(session)
        if owner is None:  # never opened here, or ended: MCP's answer is a 404 (the client opens a new one)
            return UnknownSession("no MCP session with this id is open here: open a new one")
        if owner != account:
            return AccessError("this MCP session was opened by another account: open your own")
        self._by_account[account].move_to_end(session)
        return None

    def answered(self, message: dict[str, Any], account: str, ending: bytes | None) -> None:
        """The head of the SDK's answer to ``account``'s request: a session it opened is noted as the account's;
        ``ending`` (the session a DELETE named) forgotten once the SDK agreed to end it."""
        if not 200 <= message.get("status", 0) < 300:
            return
        if ending is not None:
            self._forget(ending)
        for name, value in message.get("headers", []):
            if name.lower() == SESSION_HEADER and value not in self._owner:
                mine = self._by_account.setdefault(account, OrderedDict())
                while len(mine) >= self.max_per_account:
                    self._forget(next(iter(mine)))
                mine[value] = None
                self._owner[value] = account

    def _forget(self, session: bytes) -> None:
        account = self._owner.pop(session, None)
        if account is not None:
            mine = self._by_account[account]
            mine.pop(session, None)
            if not mine:
                del self._by_account[account]
