"""The gateway's hop to its upstream against an upstream that misbehaves on the wire. The attacker here controls
every byte the upstream sends: its status line, headers, body framing and timing. The effects checked: the client
gets an OpenAI-shaped 502 naming what happened (or, mid-stream, the stream ends), the gateway keeps serving, logs
no traceback, and relays bytes exactly as sent (never decompressed, never re-encoded)."""

from __future__ import annotations

import asyncio
import gzip
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundstate.providers import Upstream, UpstreamFailure

from ..loopback import Reply, loopback, raw_loopback
from .conftest import GatewayFor


def broken_off(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 5000\r\n\r\n"
                       b'data: {"choices": [{"index": 0, "delta": {"content": "half"}}]}\n\n')  # fmt: skip


def malformed(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 200 OK\r\nX-" + b"a" * 200_000 + b": 1\r\n\r\n")


def stalls(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    time.sleep(3)


def post(base_url: str) -> httpx.Response:
    return httpx.post(f"{base_url}/chat/completions", json={"model": "m", "stream": True}, timeout=30)


def test_a_reply_broken_off_mid_body_ends_the_stream_and_the_gateway_serves_on(gateway_for: GatewayFor) -> None:
    with raw_loopback(broken_off) as url:
        base_url, _ = gateway_for(url)
        for _ in range(2):  # and again: the connection that broke is not reused
            response = post(base_url)
            assert response.status_code == 200 and b'"half"' in response.content
        assert "Traceback" not in _stderr_so_far(gateway_for)


def test_malformed_headers_are_a_502_that_says_so(gateway_for: GatewayFor) -> None:
    with raw_loopback(malformed) as url:
        base_url, _ = gateway_for(url)
        response = post(base_url)
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_unreachable" and "sent a malformed reply" in error["message"]
    assert "Traceback" not in _stderr_so_far(gateway_for)


def test_a_stalled_reply_times_out() -> None:
    async def read_all(url: str) -> None:
        upstream = Upstream(read_seconds=0.5)
        try:
            async with upstream.request("POST", url, b"{}", {}) as reply:
                async for _ in reply.chunks():
                    pass
        finally:
            await upstream.close()

    with raw_loopback(stalls) as url, pytest.raises(UpstreamFailure, match="timed out"):
        asyncio.run(read_all(url))  # "timed out", not "broke off": the timeout ended it before the hang-up


def never_answers(connection: socket.socket) -> None:
    time.sleep(3)


def trickles(connection: socket.socket) -> None:
    """Twelve chunks, one every 0.15 s: 1.8 s in all, never 0.5 s without a byte."""
    connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    for number in range(12):
        time.sleep(0.15)
        piece = f"data: {number}\n\n".encode()
        connection.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    connection.sendall(b"0\r\n\r\n")


def at_once(connection: socket.socket) -> None:
    pieces = b"".join(f"data: {number}\n\n".encode() for number in range(12))
    connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
                       + str(len(pieces)).encode() + b"\r\n\r\n" + pieces)  # fmt: skip
    time.sleep(5)


def stalls_after_two(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    for number in range(2):
        piece = f"data: {number}\n\n".encode()
        connection.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    time.sleep(3)


async def read_with_timeout(url: str, read_seconds: float, pause: float = 0.0) -> tuple[list[bytes], float]:
    """The body's pieces read through ``Upstream`` with a read timeout of ``read_seconds`` (``pause``: how long the
    reader spends on each piece before asking for the next, as the gateway relaying to a slow client), and how
    long it took."""
    upstream = Upstream(read_seconds=read_seconds)
    started = time.monotonic()
    pieces: list[bytes] = []
    try:
        async with upstream.request("POST", url, b"{}", {}) as reply:
            async for piece in reply.chunks():
                pieces.append(piece)
                await asyncio.sleep(pause)
    finally:
        await upstream.close()
    return pieces, time.monotonic() - started


def test_a_reply_whose_head_never_comes_times_out() -> None:
    with raw_loopback(never_answers) as url, pytest.raises(UpstreamFailure, match="timed out"):
        asyncio.run(read_with_timeout(url, 0.5))


def test_the_read_timeout_is_between_reads_not_for_the_whole_reply() -> None:
    """1.8 s of reply under a 0.5 s timeout: each wait is short, so it is read whole."""
    with raw_loopback(trickles) as url:
        pieces, took = asyncio.run(read_with_timeout(url, 0.5))
    assert b"".join(pieces) == b"".join(f"data: {number}\n\n".encode() for number in range(12))
    assert took > 1.5


def test_a_reply_that_stalls_midway_times_out_after_its_last_read() -> None:
    with raw_loopback(stalls_after_two) as url:
        started = time.monotonic()
        with pytest.raises(UpstreamFailure, match="timed out"):
            asyncio.run(read_with_timeout(url, 0.5))
        assert time.monotonic() - started < 2.5  # the upstream hangs up after 3 s: the timeout came first


def test_time_the_reader_spends_elsewhere_is_not_the_upstreams() -> None:
    """The reader takes 0.3 s per piece with a 0.2 s timeout: nothing times out, as nothing waited on the upstream
    that long (the reply arrived at once, or a piece every 0.15 s)."""
    for answer in (at_once, trickles):
        with raw_loopback(answer) as url:
            pieces, _ = asyncio.run(read_with_timeout(url, 0.2, pause=0.3))
        assert b"".join(pieces).count(b"data: ") == 12


def test_bytes_are_relayed_as_sent_and_identity_is_asked_for(gateway_for: GatewayFor) -> None:
    seen: list[dict[str, str]] = []
    packed = gzip.compress(b'data: {"choices": []}\n\ndata: [DONE]\n\n')

    def respond(path: str, headers: dict[str, str], body: bytes) -> Reply:
        seen.append({name.lower(): value for name, value in headers.items()})
        return Reply(200, {"content-type": "text/event-stream", "content-encoding": "gzip"}, packed, chunk=7)

    with loopback(respond) as url:
        base_url, _ = gateway_for(url)
        with httpx.stream(
            "POST",
            f"{base_url}/chat/completions",
            json={"model": "m", "stream": True},
            headers={"authorization": "Bearer sk-client", "accept-encoding": "gzip"},
        ) as response:
            relayed = b"".join(response.iter_raw())  # fmt: skip
    assert relayed == packed and response.headers["content-encoding"] == "gzip"
    assert seen[0]["accept-encoding"] == "identity" and seen[0]["authorization"] == "Bearer sk-client"


def test_the_hosts_netrc_never_signs_a_client_in(gateway_for: GatewayFor, tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []

    def respond(path: str, headers: dict[str, str], body: bytes) -> Reply:
        seen.append({name.lower(): value for name, value in headers.items()})
        return Reply(200, {"content-type": "text/event-stream"}, b"data: [DONE]\n\n")

    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login operator password s3cret\n")
    netrc.chmod(0o600)
    with loopback(respond) as url:
        base_url, _ = gateway_for(url, environment={"NETRC": str(netrc), "HOME": str(tmp_path)})
        assert post(base_url).status_code == 200  # a client without credentials of its own
        answered = httpx.post(f"{base_url}/chat/completions", json={"model": "m"}, timeout=30,
                              headers={"authorization": "Bearer sk-client"})  # fmt: skip
    assert "authorization" not in seen[0]  # not the operator's, from the host's netrc
    assert answered.status_code == 200 and seen[1]["authorization"] == "Bearer sk-client"


def test_the_upstream_hop_goes_through_the_environments_proxy(gateway_for: GatewayFor) -> None:
    asked: list[str] = []

    def proxy(path: str, headers: dict[str, str], body: bytes) -> Reply:
        asked.append(path)  # a proxy is asked for the absolute URL
        return Reply(200, {"content-type": "text/event-stream"}, b"data: [DONE]\n\n")

    upstream = "http://upstream.invalid:9"  # only the proxy can reach it
    with loopback(proxy) as proxy_url:
        base_url, _ = gateway_for(upstream, environment={"HTTP_PROXY": proxy_url, "NO_PROXY": ""})
        assert post(base_url).status_code == 200
        bypassing, _ = gateway_for(upstream, environment={"HTTP_PROXY": proxy_url, "NO_PROXY": "upstream.invalid"})
        assert post(bypassing).status_code == 502  # NO_PROXY names the host: straight there, and nothing answers
    assert asked == [f"{upstream}/v1/chat/completions"]


def _stderr_so_far(gateway_for: Any) -> str:
    """What the gateway started by the fixture has written to its stderr (it is still running)."""
    process = gateway_for.processes[-1]
    process.terminate()
    return str(process.communicate(timeout=10)[1].decode(errors="replace"))
