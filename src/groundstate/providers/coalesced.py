"""The gateway's HTTP server protocol: uvicorn's, with the writes of one turn of the event loop sent as one.

Through ASGI a reply is at least two messages — its head, then its body — and uvicorn writes each to the socket at
once, so a reply that arrived from the upstream whole still cost the gateway a ``send`` system call for its head
and another for its body (on loopback each send also runs the receiver's side of TCP: about a sixth of the
gateway's CPU per stream went to them). Here the writes made before the loop next turns are joined and sent
together when it does: the head with the first body piece, and with the last one too when all of it was there. A
stream whose pieces come one at a time is written as before, a piece per turn; nothing waits for more than the turn
it was written in.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescedWrites:
    """A transport whose writes within one turn of the loop go to the socket as one write at the turn's end.
    Everything else is the wrapped transport's; closing it sends what is pending first, aborting it drops that."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._pending: list[bytes] = []
        self._loop = asyncio.get_running_loop()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Send what this turn wrote (nothing once the transport is closing: its socket takes no more)."""
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a ``CoalescedWrites`` transport (``uvicorn.Config(http=...)``)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescedWrites(transport))  # type: ignore[arg-type]
