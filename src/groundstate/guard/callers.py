"""Who sent a ``tools/call``, read once from the transport that carried it.

The guard's decisions need four things about a call's sender: which client session it belongs to (its history is
provenance), the name the ledger gives the client, the operator account whose token it carried (HTTP: that account
may not approve its own call), and — while a held call waits — how to tell the client it is still waiting and
whether it went away. The SDK's server hands these over as a request context; the guard's own stdio path
(``fast_calls.py``) builds them directly. Both end in one ``Caller``, so the guard reads no transport itself."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio

OPERATOR_STATE = "groundstate_operator"  # where the HTTP transport leaves the authenticated account for the handler
EXCHANGE_STATE = "groundstate_exchange"  # and the number of the HTTP exchange that carried the request (Departures)
MAX_CLIENT_NAME = 80


@dataclass(frozen=True)
class Caller:
    """A call's sender, as the guard sees it."""

    session: str  # its conversation: "stdio", "http:<account>:session:<mcp-session-id>", or "http:<account>:stateless"
    client: str  # the ledger's name for the client: "NAME over TRANSPORT [as operator:ACCOUNT]"
    account: str | None = None  # the operator account whose token made the call (HTTP)
    progress: Callable[[float, str], Awaitable[None]] | None = None  # tells a waiting client how long it has waited
    gone: Callable[[], bool] | None = None  # whether the client closed its connection (HTTP)
    told: str | None = None  # whose results the call is judged against, if not its session's alone (see caller_of)

    @property
    def history(self) -> str:
        """The key of the history whose results the call is judged against; the user's request is its session's."""
        return self.told or self.session


def client_name(name: object, transport: str, account: str | None) -> str:
    """The ledger's and ``mcp_call``'s name for a client: the name it gave when it connected (its ``clientInfo``),
    the transport, and the operator account whose token it sent."""
    shown = str(name or "")[:MAX_CLIENT_NAME] or "an unnamed client"
    return f"{shown} over {transport}" + (f" as operator:{account}" if account else "")


def caller_of(ctx: Any, transport: str, departures: Any = None) -> Caller:
    """The ``Caller`` of a request the SDK's server handles (``ctx``: its request context)."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    state = getattr(request, "scope", {}).get("state") or {}
    found = state.get(OPERATOR_STATE) if isinstance(state, dict) else None
    account = str(found) if found else None
    if headers is not None:
        opened = headers.get("mcp-session-id")  # one this guard opened for this account (the transport checks)
        # An account's sessions share what they were told: a client that opens a session per call (LangGraph's
        # get_tools() without a session) would otherwise send, in a session that read nothing, what the mail it
        # read in another told it to; so do requests without a session (MCP's 2026 protocol), which each had a
        # history of their own. Stricter, never looser: the request a session declared vouches for it alone —
        # without a session, for the account's requests without one. (Account names hold no colon: no key of one
        # kind or account is another's.)
        told: str | None = f"http:{account or ''}"
        session = f"{told}:session:{opened}" if opened else f"{told}:stateless"
    else:
        session, told = "stdio", None
    info = getattr(getattr(getattr(ctx, "session", None), "client_params", None), "client_info", None)
    gone = None
    if departures is not None and isinstance(state, dict) and EXCHANGE_STATE in state:
        gone = partial(departures.__contains__, state[EXCHANGE_STATE])
    return Caller(session, client_name(getattr(info, "name", ""), transport, account), account,
                  partial(_sdk_progress, ctx), gone, told)  # fmt: skip


async def _sdk_progress(ctx: Any, waited: float, message: str) -> None:
    """A progress notification through the SDK's session, when the client asked for them (a ``progressToken``)."""
    session = getattr(ctx, "session", None)
    if session is None:
        return
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):  # the client went away
        await session.report_progress(waited, None, message)
