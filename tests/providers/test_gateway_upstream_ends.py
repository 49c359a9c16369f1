"""What the gateway publishes when an upstream ends badly or says much: found by an attack on its publishing.

Each upstream here is a raw socket server, so that it can do what an HTTP library would not: break off mid-stream
with a reset, leave out ``[DONE]``, stream two completions at once, send an error body of hundreds of megabytes.
The client's bytes are checked unchanged; the subscribers' SIGIL is checked to say what really happened.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from pathlib import Path

import httpx
import pytest

from groundstate.wire import Content, Mode, Reset, StreamEnd, UpstreamError

from ..loopback import raw_loopback
from .conftest import GatewayFor
from .test_gateway import subscribe


def sse(*events: dict[str, object], done: bool = True) -> bytes:
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return body + (b"data: [DONE]\n\n" if done else b"")


def text_event(text: str, index: int = 0) -> dict[str, object]:
    return {"choices": [{"index": index, "delta": {"content": text}, "finish_reason": None}]}


def stream_head(status: int = 200, length: int | None = None) -> bytes:
    framing = f"content-length: {length}" if length is not None else "connection: close"
    return f"HTTP/1.1 {status} X\r\ncontent-type: text/event-stream\r\n{framing}\r\n\r\n".encode()


def chat(base_url: str) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    return httpx.post(f"{base_url}/chat/completions", json=body, headers={"authorization": "Bearer sk"}, timeout=60)


def test_an_upstream_that_breaks_off_mid_stream_is_published_as_a_failure(gateway_for: GatewayFor) -> None:
    """A reset after part of the answer was published as a normal end: a subscriber took half an answer for all
    of it. Now the subscribers get an upstream error (the stream is reset, its partial text dropped)."""
    partial = sse(text_event("half an "), text_event("answer"), done=False)

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=len(partial) + 10_000) + partial)
        time.sleep(0.3)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset

    with raw_loopback(serve) as upstream:
        base_url, pub = gateway_for(upstream)
        receiver = subscribe(pub)
        with contextlib.suppress(httpx.HTTPError):  # the client sees its stream end early
            chat(base_url)
        chunks = list(receiver.receive(timeout_ms=2000)) + receiver.close()
    errors = [c.error for c in chunks if isinstance(c, UpstreamError)]
    assert len(errors) == 1 and errors[0]["plane"] == "server", chunks
    assert [c.reason for c in chunks if isinstance(c, Reset)] == ["UpstreamError"]


def test_a_stream_without_its_end_marker_ends_once_cut_off(gateway_for: GatewayFor) -> None:
    """A clean close without ``[DONE]`` was published as a cut-off end and then a second STREAM_END. The client
    gets the upstream's bytes unchanged, then the error in band (the stream did not end)."""
    body = sse(text_event("no end marker"), done=False)

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=len(body)) + body)

    with raw_loopback(serve) as upstream:
        base_url, pub = gateway_for(upstream)
        receiver = subscribe(pub)
        received = chat(base_url).content
        assert received.startswith(body) and b"ended without data: [DONE]" in received[len(body):]
        chunks = list(receiver.receive(timeout_ms=2000)) + receiver.close()
    assert len([c for c in chunks if isinstance(c, StreamEnd)]) == 1, chunks
    assert b"".join(bytes(c.tokens) for c in chunks if isinstance(c, Content)) == b"no end marker"


def test_two_completions_are_published_on_two_streams(gateway_for: GatewayFor) -> None:
    """With ``n=2`` both completions' text was merged into one chunk. Each now has a stream of its own, ending
    once, and each stream's text is exactly its completion's."""
    body = sse(text_event("first ", 0), text_event("second ", 1), text_event("one", 0), text_event("two", 1),
               {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"},
                            {"index": 1, "delta": {}, "finish_reason": "stop"}]})  # fmt: skip

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=len(body)) + body)

    with raw_loopback(serve) as upstream:
        base_url, pub = gateway_for(upstream)
        receiver = subscribe(pub)
        assert chat(base_url).content == body
        chunks = list(receiver.receive(timeout_ms=2000)) + receiver.close()
    texts: dict[int, bytes] = {}
    for chunk in chunks:
        if isinstance(chunk, Content) and chunk.mode == Mode.TEXT:
            texts[chunk.stream] = texts.get(chunk.stream, b"") + bytes(chunk.tokens)
    assert sorted(texts.values()) == [b"first one", b"second two"], texts
    ends = [c.stream for c in chunks if isinstance(c, StreamEnd)]
    assert sorted(ends) == sorted(texts), chunks


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_huge_error_body_is_relayed_without_being_held(gateway_for: GatewayFor) -> None:
    """A non-2xx ``text/event-stream`` body was read whole before it was relayed: 320 MiB held 1.4 GB of the
    gateway's memory. It is relayed as it comes now, its first MiB classified; the gateway's peak memory stays far
    under the body's size, and the client gets every byte."""
    piece = b"x" * (1 << 20)
    size_mib = 256

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(status=500, length=size_mib * len(piece)))
        for _ in range(size_mib):
            conn.sendall(piece)

    with raw_loopback(serve) as upstream:
        base_url, pub = gateway_for(upstream)
        receiver = subscribe(pub)
        pid = gateway_for.processes[-1].pid  # type: ignore[attr-defined]
        received = 0
        with httpx.stream("POST", f"{base_url}/chat/completions", timeout=120,
                          json={"model": "m", "messages": [], "stream": True}) as response:  # fmt: skip
            assert response.status_code == 500
            for data in response.iter_raw():
                received += len(data)
        chunks = list(receiver.receive(timeout_ms=2000)) + receiver.close()
        peak_mib = _peak_rss_kib(pid) / 1024
    assert received == size_mib * len(piece)
    assert peak_mib < 200, f"the gateway's peak memory was {peak_mib:.0f} MiB for a {size_mib} MiB error body"
    [error] = [c.error for c in chunks if isinstance(c, UpstreamError)]
    assert error["plane"] == "server" and error["status"] == 500


def test_a_whole_reply_to_be_gated_is_refused_past_its_bound(gateway_for: GatewayFor) -> None:
    """A non-streamed reply the packet gate judges is read whole first; the upstream decides its size. Past 8 MiB
    it is refused with a 502 naming the bound, and the gateway's memory never holds the rest."""
    size = 64 << 20

    def serve(conn: socket.socket) -> None:
        conn.sendall(f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {size}\r\n\r\n".encode())
        piece = b" " * (1 << 20)
        for _ in range(size >> 20):
            conn.sendall(piece)

    with raw_loopback(serve) as upstream:
        base_url, _ = gateway_for(upstream, "--gate")
        pid = gateway_for.processes[-1].pid  # type: ignore[attr-defined]
        reply = httpx.post(f"{base_url}/chat/completions", json={"model": "m", "messages": []}, timeout=60)
        peak_mib = _peak_rss_kib(pid) / 1024
    assert reply.status_code == 502
    assert "larger than 8388608 bytes" in reply.json()["error"]["message"]
    assert peak_mib < 200, peak_mib


def _stderr(gateway_for: GatewayFor) -> str:
    process = gateway_for.processes[-1]  # type: ignore[attr-defined]
    process.terminate()
    return str(process.communicate(timeout=10)[1].decode(errors="replace"))


MAX_EVENT = 4 << 20  # bytes of one event without its end: the bound docs/providers.md states


def _rss_kib(pid: int) -> int:
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1])


def test_an_event_that_never_ends_is_refused_before_it_fills_the_gateways_memory(gateway_for: GatewayFor) -> None:
    """An attack found the metrics' parser holding every byte of a line that never ended (and of an event whose
    lines never met a blank one): the gateway grew by a megabyte for each relayed one. Now an event past
    ``MAX_EVENT`` bytes ends the stream with an in-band error, and the gateway's memory stays put."""
    endless = b"data: " + b"x" * 65536  # then more of the same line, never ended

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head())
        with contextlib.suppress(OSError):
            for _ in range(40 * 1024 * 1024 // len(endless)):  # 40 MiB, ten times the bound
                conn.sendall(endless)

    for name, shape in (("one line", endless), ("lines, no blank one", b"data: " + b"y" * 65530 + b"\n")):
        endless = shape
        with raw_loopback(serve) as upstream:
            base_url, _ = gateway_for(upstream)
            pid = gateway_for.processes[-1].pid  # type: ignore[attr-defined]
            chat(base_url)  # warmed up: what the first request loads is not counted
            before = _rss_kib(pid)
            received = bytearray()
            with contextlib.suppress(httpx.HTTPError), httpx.stream(
                "POST", f"{base_url}/chat/completions", timeout=60,
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
            ) as reply:  # fmt: skip
                for piece in reply.iter_raw():
                    received += piece
            grown = _rss_kib(pid) - before
        assert len(received) < 2 * MAX_EVENT, name
        assert b"longer than" in received[-2000:], name  # told in band, an event of its own
        assert grown < 3 * MAX_EVENT // 1024, f"{name}: the gateway grew by {grown} KiB"
        assert "Traceback" not in _stderr(gateway_for)


def test_a_whole_reply_cut_short_is_not_passed_off_as_complete(gateway_for: GatewayFor) -> None:
    """A JSON reply (or an error body) has no framing to tell a break in: the gateway ended its own reply
    cleanly, and the client read two bytes of a hundred as the whole answer. Now the client's reply is left
    unended, so the client sees it cut short."""
    for status in (200, 500):
        def serve(conn: socket.socket, status: int = status) -> None:
            conn.sendall(f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{}}"
                         .encode())  # fmt: skip

        with raw_loopback(serve) as upstream:
            base_url, _ = gateway_for(upstream)
            with pytest.raises(httpx.RemoteProtocolError):
                httpx.post(f"{base_url}/chat/completions", json={"model": "m", "messages": []}, timeout=30)
            assert "Traceback" not in _stderr(gateway_for)


def test_a_reply_that_cannot_have_a_body_is_relayed_as_it_is(gateway_for: GatewayFor) -> None:
    """A 204 or 304 to a chat request: the gateway told it in band that the stream had ended without its end
    marker, which no server may send in such a reply — a traceback in the gateway's log."""
    for status in (204, 304):
        def serve(conn: socket.socket, status: int = status) -> None:
            conn.sendall(f"HTTP/1.1 {status} X\r\n\r\n".encode())

        with raw_loopback(serve) as upstream:
            base_url, _ = gateway_for(upstream)
            reply = chat(base_url)
            assert reply.status_code == status and reply.content == b""
            assert "Traceback" not in _stderr(gateway_for)
