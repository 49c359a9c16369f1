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
