"""The gateway's HTTP server protocol: uvicorn's, with a reply's head sent together with what follows it at once.

Through ASGI a reply is at least two messages — its head, then its body — and uvicorn writes each to the socket at
once, so a reply that arrived from the upstream whole still cost the gateway a ``send`` system call for its head
and another for its body (on loopback each send also runs the receiver's side of TCP: about a sixth of the
gateway's CPU per stream went to them). Here a reply's first write is held until the event loop's turn ends, and
whatever else the turn writes joins it: the head leaves with the first body piece, and with the last one too when
all of it was there. Every later write goes out at once, as uvicorn made it — a stream whose pieces come one at a
time is written a piece at a time, and pays nothing for this; nothing waits longer than the turn it was written in.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescedWrites:
    """A transport that holds the first write after ``hold_next`` until the loop's turn ends, joined with the
    writes made in that turn, and passes every other write on at once. Everything else is the wrapped transport's;
    closing it sends what is held first, aborting it drops that."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._pending: list[bytes] = []
        self._hold = False
        self._loop = asyncio.get_running_loop()

    def hold_next(self) -> None:
        """Hold the next write (a reply's head) for the rest of the turn it is made in."""
        self._hold = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if self._pending:
            self._pending.append(bytes(data))
        elif self._hold:
            self._hold = False
            self._pending.append(bytes(data))
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Send what is held (nothing once the transport is closing: its socket takes no more)."""
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
    """uvicorn's httptools protocol on a ``CoalescedWrites`` transport (``uvicorn.Config(http=...)``): each
    request's reply has its head held for the rest of its turn."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """uvicorn's, on the socket's transport wrapped in ``CoalescedWrites``."""
        self._coalesced = CoalescedWrites(transport)
        super().connection_made(self._coalesced)  # type: ignore[arg-type]

    def on_message_begin(self) -> None:
        """uvicorn's; and the reply to this request will have its head held for the rest of its turn."""
        super().on_message_begin()
        self._coalesced.hold_next()
