"""The gateway's own HTTP/1.1 hop to its upstream (``http_wire``), against upstreams that write raw bytes: every
byte of the head, the framing and the timing is the upstream's. The effects checked, through ``Upstream``: the
reply's body arrives exactly as framed, nothing after a reply is read as part of it or of the next, a connection is
reused only after a complete reply that keeps it alive, and whatever the upstream breaks is one
``UpstreamFailure`` naming it — quickly, never a hang until the read timeout."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable

import pytest
import uvloop

from groundstate.providers import Upstream, UpstreamFailure

from ..loopback import raw_loopback, read_request

Exchange = tuple[int, list[tuple[bytes, bytes]], bytes]
IDLE_SECONDS = 4.0  # how long a kept-alive connection may idle, as docs/security.md states


def requests(url: str, count: int, method: str = "POST", pause: float = 0.0, between: float = 0.0,
             loop: Callable[[], asyncio.AbstractEventLoop] | None = None) -> list[Exchange]:  # fmt: skip
    """``count`` requests one after the other through one ``Upstream`` (its pool kept between them): each reply's
    status, headers and whole body (``pause``: after each piece read; ``between``: after each reply is done;
    ``loop``: the event loop's factory, asyncio's by default)."""

    async def run() -> list[Exchange]:
        upstream = Upstream(read_seconds=5)
        seen: list[Exchange] = []
        try:
            for _ in range(count):
                async with upstream.request(method, url + "/v1/chat/completions", b"{}", {}) as reply:
                    body = b""
                    async for piece in reply.chunks():
                        body += piece
                        await asyncio.sleep(pause)
                    seen.append((reply.status_code, reply.raw_headers, body))
                await asyncio.sleep(between)
        finally:
            await upstream.close()
        return seen

    with asyncio.Runner(loop_factory=loop) as runner:
        return runner.run(run())


def next_request(connection: socket.socket) -> bool:
    """Read one more request from a kept-alive connection; False if it closed."""
    return read_request(connection) is not None


def test_a_kept_alive_connection_carries_the_next_request() -> None:
    connections: list[int] = []

    def answer(connection: socket.socket) -> None:
        connections.append(1)
        for number in range(3):
            if number and not next_request(connection):
                return
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nreply")

    with raw_loopback(answer) as url:
        seen = requests(url, 3)
    assert [body for _, _, body in seen] == [b"reply"] * 3
    assert len(connections) == 1


def test_bytes_after_a_reply_are_not_read_and_its_connection_is_not_reused() -> None:
    """An upstream that sends a second reply nobody asked for (response smuggling): the first reply is exactly its
    declared body, and the next request goes on a new connection, so it gets its own answer, not the smuggled one."""
    connections: list[int] = []

    def answer(connection: socket.socket) -> None:
        connections.append(1)
        if len(connections) == 1:
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"
                               b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nevil")  # fmt: skip
            time.sleep(1)
        else:
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfresh")

    with raw_loopback(answer) as url:
        seen = requests(url, 2)
    assert [body for _, _, body in seen] == [b"hello", b"fresh"]
    assert len(connections) == 2


def test_interim_replies_are_passed_over() -> None:
    def answer(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n"
                           b"HTTP/1.1 200 OK\r\nx-final: 1\r\ncontent-length: 2\r\n\r\nok")  # fmt: skip

    with raw_loopback(answer) as url:
        [(status, headers, body)] = requests(url, 1)
    assert (status, body) == (200, b"ok")
    assert (b"x-final", b"1") in headers and not any(name == b"link" for name, _ in headers)


@pytest.mark.parametrize("endless", [b"x-long: " + b"a" * 1000, b"HTTP/1.1 100 Continue\r\n\r\n"],
                         ids=["a header", "interim replies"])
def test_a_head_that_never_ends_is_refused_once_past_its_bound(endless: bytes) -> None:
    def answer(connection: socket.socket) -> None:
        start = b"" if endless.startswith(b"HTTP/") else b"HTTP/1.1 200 OK\r\n"
        connection.sendall(start)
        line = endless if start == b"" else endless + b"\r\n"
        for _ in range(200_000 // len(line)):  # 200 KB, never the end of a head
            connection.sendall(line)

    with raw_loopback(answer) as url:
        started = time.monotonic()
        with pytest.raises(UpstreamFailure, match="malformed reply"):
            requests(url, 1)
        assert time.monotonic() - started < 4  # refused on the bytes, not by the read timeout (5 s)


@pytest.mark.alone
def test_a_reply_to_head_has_no_body_to_wait_for() -> None:
    def answer(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
        time.sleep(3)

    with raw_loopback(answer) as url:
        started = time.monotonic()
        [(status, _, body)] = requests(url, 1, method="HEAD")
        took = time.monotonic() - started
    assert (status, body) == (200, b"") and took < 2.5


def test_a_body_without_a_length_ends_with_its_connection() -> None:
    def answer(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: 1\n\n")
        time.sleep(0.2)
        connection.sendall(b"data: 2\n\n")

    with raw_loopback(answer) as url:
        [(_, _, body)] = requests(url, 1)
    assert body == b"data: 1\n\ndata: 2\n\n"


@pytest.mark.parametrize(("sent", "named"), [
    (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n", "broke off"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort", "broke off"),
    (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n", "malformed reply"),
    (b"HTTP/1.1 2x0 OK\r\n\r\n", "malformed reply"),
    (b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\nbinary", "malformed reply"),
    (b"", "broke off"),
], ids=["a chunk cut short", "a length not met", "a chunk size that is no number", "a status that is no number",
        "a switch of protocols", "nothing at all"])  # fmt: skip
def test_what_the_upstream_breaks_is_named(sent: bytes, named: str) -> None:
    def answer(connection: socket.socket) -> None:
        connection.sendall(sent)

    with raw_loopback(answer) as url:
        started = time.monotonic()
        with pytest.raises(UpstreamFailure, match=named):
            requests(url, 1)
        assert time.monotonic() - started < 4


def test_a_connection_the_upstream_closed_while_idle_is_not_reused() -> None:
    connections: list[int] = []

    def answer(connection: socket.socket) -> None:
        connections.append(1)
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")  # then closed: kept alive by nobody

    with raw_loopback(answer) as url:
        seen = requests(url, 2, pause=0.2)
    assert [body for _, _, body in seen] == [b"ok", b"ok"] and len(connections) == 2


def test_a_large_reply_read_slowly_arrives_whole() -> None:
    """Megabytes sent at once to a reader that takes its time: the socket is no longer read while a quarter of a
    mebibyte waits, and every byte still arrives in order."""
    body = bytes(range(256)) * 16384  # 4 MiB

    def answer(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    with raw_loopback(answer) as url:
        [(_, _, received)] = requests(url, 1, pause=0.001)
    assert received == body


def test_a_head_that_arrives_whole_in_one_read_is_bounded_too() -> None:
    """An attack found the bound counted only across reads: 100 KB of headers in one write were taken whole."""

    def answer(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n" + b"a:b\r\n" * 20_000 + b"\r\n")

    with raw_loopback(answer) as url, pytest.raises(UpstreamFailure, match="a head longer than"):
        requests(url, 1)


def test_a_reply_followed_in_its_read_by_bytes_that_do_not_parse_stands() -> None:
    """A complete reply is the reply, whatever follows it (that is only never read, and its connection not reused):
    it was reported broken, and the gateway then told a 204 that it had ended badly."""
    connections: list[int] = []

    def answer(connection: socket.socket) -> None:
        connections.append(1)
        if len(connections) == 1:
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 2x0 junk\r\n\r\n")
            time.sleep(0.5)
        else:
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfresh")

    with raw_loopback(answer) as url:
        seen = requests(url, 2)
    assert [body for _, _, body in seen] == [b"ok", b"fresh"] and len(connections) == 2


def test_bytes_that_arrive_while_a_connection_idles_keep_it_from_reuse() -> None:
    """The attack's late second reply: 0.2 s after a complete reply, the upstream sends another. The kept
    connection was reused for the next two requests; it is closed instead, and they go on a new one."""
    connections: list[int] = []

    def answer(connection: socket.socket) -> None:
        connections.append(1)
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirst")
        if len(connections) == 1:
            time.sleep(0.2)
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nLEFTOVER")
            time.sleep(1)
            return
        while next_request(connection):
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirst")

    with raw_loopback(answer) as url:
        seen = requests(url, 3, between=0.4)
    assert [body for _, _, body in seen] == [b"first"] * 3 and len(connections) == 2


def test_a_length_header_read_leniently_still_frames_the_body() -> None:
    """``Content-Length : 100`` (a space before the colon), which the parser takes as the length: a body cut short
    of it was read as complete, since the framing check compared names exactly."""

    def answer(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length : 100\r\n\r\nabc")

    with raw_loopback(answer) as url, pytest.raises(UpstreamFailure, match="broke off"):
        requests(url, 1)


def test_idle_connections_are_closed_while_other_traffic_flows() -> None:
    """After a burst of concurrent requests, the connections left idle are closed after ``IDLE_SECONDS`` even
    though requests keep coming (the pool looked at idle time only when it took a connection, so a burst's sockets
    stayed open for good)."""
    def answer(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        while next_request(connection):
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    async def run(url: str) -> tuple[int, int]:
        upstream = Upstream(read_seconds=5)

        async def one() -> None:
            async with upstream.request("POST", url + "/x", b"{}", {}) as reply:
                async for _ in reply.chunks():
                    pass

        try:
            await asyncio.gather(*(one() for _ in range(20)))
            burst = open_sockets()
            for _ in range(int(IDLE_SECONDS * 2 / 0.5) + 2):  # a request every 0.5 s, for twice the idle time
                await one()
                await asyncio.sleep(0.5)
            await asyncio.sleep(0.3)  # the server's threads see the closed ones
            return burst, open_sockets()
        finally:
            await upstream.close()

    with raw_loopback(answer, concurrent=True) as url:
        before = open_sockets()
        burst, later = asyncio.run(run(url))
    assert burst - before >= 20  # the burst's connections, both ends, kept
    assert later - before <= 4  # one in use (both ends), and perhaps one more on its way out


def open_sockets() -> int:
    """Sockets this process holds (both ends of the loopback's connections are here)."""
    return sum(os.readlink(f"/proc/self/fd/{fd}").startswith("socket:") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}"))  # fmt: skip


def test_the_hop_works_on_uvloop_which_uvicorn_runs_the_gateway_on_when_it_is_installed() -> None:
    """uvicorn runs on uvloop whenever it is installed (``uvicorn[standard]`` installs it), and uvloop's transports
    subclass none of asyncio's: the hop's check that they did failed every relayed request with a 500. On uvloop's
    loop: a kept-alive connection carries the next request, a chunked reply arrives whole, and a large one read
    slowly (the socket paused and resumed) arrives in order."""
    large = bytes(range(256)) * 4096  # 1 MiB
    connections: list[int] = []

    def answer(connection: socket.socket) -> None:
        connections.append(1)
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nreply")
        if next_request(connection):
            connection.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                               b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")  # fmt: skip
        if next_request(connection):
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: " + str(len(large)).encode() + b"\r\n\r\n" + large)

    with raw_loopback(answer) as url:
        seen = requests(url, 3, pause=0.0005, loop=uvloop.new_event_loop)
    assert [body for _, _, body in seen] == [b"reply", b"hello world", large]
    assert len(connections) == 1


def test_a_hundred_streams_at_once_keep_their_connections_for_the_next_hundred() -> None:
    """The pool keeps as many idle connections as a busy gateway carries streams at once: with 64 kept, a second
    round of 100 concurrent requests connected 36 times anew (and the first round's 36 were closed), a third of
    the gateway's upstream connections made and torn down every round."""
    connections: list[int] = []

    def answer(connection: socket.socket) -> None:
        connections.append(1)
        while True:
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nreply")
            if not next_request(connection):
                return

    async def one(upstream: Upstream, url: str) -> bytes:
        async with upstream.request("POST", url + "/v1/chat/completions", b"{}", {}) as reply:
            return b"".join([piece async for piece in reply.chunks()])

    async def rounds(url: str) -> list[list[bytes]]:
        upstream = Upstream(read_seconds=10)
        try:
            return [list(await asyncio.gather(*(one(upstream, url) for _ in range(100)))) for _ in range(2)]
        finally:
            await upstream.close()

    with raw_loopback(answer, concurrent=True) as url:
        answered = asyncio.run(rounds(url))
    assert answered == [[b"reply"] * 100] * 2
    assert len(connections) == 100
