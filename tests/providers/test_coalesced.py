"""The gateway's server protocol sends a reply's head together with what the same turn of the event loop writes
after it, and every later write at once: uvicorn's own protocol on a transport that records each write it is
given, driven by a request the way a socket would deliver it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from groundstate.providers import CoalescingHttpToolsProtocol

App = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
               Awaitable[None]]  # fmt: skip


class Recording(asyncio.Transport):
    """A socket's side of a transport: each write as it would reach the socket, and whether it was closed."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "written after it was closed"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def served(app: App, request: bytes = b"GET / HTTP/1.1\r\nHost: gateway\r\n\r\n",
           transport: Recording | None = None) -> Recording:  # fmt: skip
    """``request`` given to the protocol as one read; the transport (``transport``, or a new one) once the app has
    answered and the loop turned."""
    transport = transport or Recording()

    async def run() -> Recording:
        config = uvicorn.Config(app, http=CoalescingHttpToolsProtocol, lifespan="off", log_level="warning",
                                server_header=False, date_header=False)  # fmt: skip
        config.load()
        protocol = CoalescingHttpToolsProtocol(config=config, server_state=ServerState(), app_state={})
        protocol.connection_made(transport)
        protocol.data_received(request)
        for _ in range(50):
            await asyncio.sleep(0.01)
            if protocol.cycle is not None and protocol.cycle.response_complete and not protocol.tasks:
                break
        await asyncio.sleep(0.01)
        return transport

    return asyncio.run(run())


async def whole(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    """Head, two pieces and the end, one after the other: what the gateway sends for a reply that came whole."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"one ", "more_body": True})
    await send({"type": "http.response.body", "body": b"two"})


def test_a_reply_written_in_one_turn_leaves_in_one_write() -> None:
    transport = served(whole)
    assert len(transport.writes) == 1, transport.writes
    [written] = transport.writes
    assert written.startswith(b"HTTP/1.1 200 OK\r\n") and written.endswith(b"4\r\none \r\n3\r\ntwo\r\n0\r\n\r\n")


def test_a_piece_written_in_a_later_turn_is_not_held_back_for_more() -> None:
    """A stream whose pieces come apart: the head leaves at the end of its turn, before the app's next piece is
    even made, and that piece leaves as it is written, held for nothing."""
    transport = Recording()
    seen_at_second_piece: list[int] = []

    async def paced(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.sleep(0.02)
        seen_at_second_piece.append(len(transport.writes))
        await send({"type": "http.response.body", "body": b"late"})
        seen_at_second_piece.append(len(transport.writes))

    served(paced, transport=transport)
    assert seen_at_second_piece == [1, 2], "the head waited for the body, or the body for the turn's end"
    assert len(transport.writes) == 2 and transport.writes[1] == b"4\r\nlate\r\n0\r\n\r\n"


def test_a_connection_closed_after_its_reply_gets_the_reply_first() -> None:
    """A reply whose client asked to close: what the turn wrote is sent before the socket is closed."""
    transport = served(whole, b"GET / HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n")
    assert transport.closed
    assert b"".join(transport.writes).endswith(b"two\r\n0\r\n\r\n")


def test_the_gateway_serves_on_this_protocol_without_what_it_never_uses(monkeypatch: Any) -> None:
    """``serve_gateway`` hands uvicorn this protocol, no WebSockets, no access log and no proxy headers: each was
    measured (docs/benchmarks.md, the gateway), and a refactor that drops one would go unseen by every reply, which
    arrives the same either way. uvicorn's ``Server.run`` is replaced by one that keeps the config it was given."""
    from groundstate.providers import serve_gateway

    given: list[uvicorn.Config] = []

    def keep(server: uvicorn.Server, sockets: Any = None) -> None:
        given.append(server.config)
        server.started = True

    monkeypatch.setattr(uvicorn.Server, "run", keep)
    serve_gateway("http://127.0.0.1:9", "openai-chat", "127.0.0.1", 0, None, None)
    [config] = given
    assert config.http is CoalescingHttpToolsProtocol
    assert (config.ws, config.access_log, config.proxy_headers, config.loop) == ("none", False, False, "asyncio")
    assert (config.server_header, config.date_header) == (False, False)
