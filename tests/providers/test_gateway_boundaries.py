"""The gateway between a client and an upstream it does not trust, found by an attack on it: credentials in
``--upstream``, headers and statuses no HTTP server may send on, a stream that breaks off after it began (gated or
not), a client that leaves mid-reply, a path that climbs out of the upstream's base path, ``Expect: 100-continue``,
and a slow client at shutdown. Each through a raw-socket upstream and the real gateway process."""

from __future__ import annotations

import base64
import json
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from ..loopback import raw_loopback
from ..runtime.conftest import envelope
from .conftest import GatewayFor
from .test_gateway import subscribe
from .test_gateway_upstream_ends import chat, sse, stream_head, text_event

HI = [{"role": "user", "content": "hi"}]


def reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # the close is a reset


def answer(head: bytes, body: bytes) -> Any:
    def serve(conn: socket.socket) -> None:
        conn.sendall(head + f"content-length: {len(body)}\r\n\r\n".encode() + body)

    return serve


def test_credentials_in_the_upstream_url_replace_the_clients_authorization(gateway_for: GatewayFor) -> None:
    """Every SDK sends an Authorization; with ``user:password@`` in ``--upstream`` too, each request was a 500."""
    heads: list[bytes] = []
    body = sse(text_event("fine"))
    with raw_loopback(answer(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n", body), heads) as upstream:
        base_url, _ = gateway_for(upstream.replace("http://", "http://operator:p%40ss@") + "/v1")
        reply = chat(base_url)
    assert reply.status_code == 200 and reply.content == body
    [authorization] = [line for line in heads[0].split(b"\r\n") if line.lower().startswith(b"authorization:")]
    assert authorization.split(b":", 1)[1].strip() == b"Basic " + base64.b64encode(b"operator:p@ss")


@pytest.mark.parametrize(("header", "relayed"), [
    (b"x-note: \xe2\x82\xac and \xff\r\n", (b"x-note", b"\xe2\x82\xac and \xff")),  # 8-bit text: as sent
    (b"x-bad: a\x01b\r\n", None),  # a control byte: no server may send it on; dropped, the reply still comes
])  # fmt: skip
def test_upstream_header_bytes_are_relayed_as_sent_or_dropped(
    gateway_for: GatewayFor, header: bytes, relayed: tuple[bytes, bytes] | None
) -> None:
    """A non-Latin-1 value was a 500 with a traceback; a control byte left the client with no answer at all."""
    body = sse(text_event("fine"))
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + header
    with raw_loopback(answer(head, body)) as upstream:
        base_url, _ = gateway_for(upstream)
        with httpx.Client(timeout=30) as client:
            reply = client.post(f"{base_url}/chat/completions", json={"model": "m", "messages": HI, "stream": True})
    assert reply.status_code == 200 and reply.content == body
    names = [name for name, _ in reply.headers.raw]
    if relayed is None:
        assert b"x-bad" not in names
    else:
        assert relayed in reply.headers.raw


@pytest.mark.parametrize("status", [600, 999, 101])
def test_a_status_http_has_no_class_for_is_a_502(gateway_for: GatewayFor, status: int) -> None:
    """Statuses 600 and 999 closed the client's connection without an answer; a final 101 was relayed as a switch."""
    with raw_loopback(answer(f"HTTP/1.1 {status} Odd\r\n".encode(), b"{}")) as upstream:
        base_url, _ = gateway_for(upstream)
        reply = chat(base_url)
    assert reply.status_code == 502
    assert reply.json()["error"]["code"] == "upstream_unreachable"
    assert f"sent a malformed reply (status {status})" in reply.json()["error"]["message"]


def test_a_stream_that_breaks_off_is_an_error_the_sdk_raises(gateway_for: GatewayFor) -> None:
    """The client's stream ended cleanly after half an answer: the SDK returned it as the whole. Now the break is
    told in band (after the upstream's bytes, unchanged) and the OpenAI SDK raises it."""
    partial = sse(text_event("half an "), text_event("answ"), done=False)[:-5]  # cut mid-event, too

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=len(partial) + 10_000) + partial)
        time.sleep(0.3)
        reset(conn)

    with raw_loopback(serve) as upstream:
        base_url, _ = gateway_for(upstream)
        raw = chat(base_url).content
        whole = partial[: partial.rfind(b"\n\n") + 2]  # the event the upstream never ended is not relayed
        assert raw.startswith(whole) and raw[len(whole):].startswith(b'data: {"error": ')
        assert b'"code": "upstream_unreachable"' in raw[len(whole):]
        client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        with pytest.raises(openai.APIError, match="broke off before the reply was complete"):
            for _ in client.chat.completions.create(model="m", messages=HI, stream=True):  # type: ignore[arg-type]
                pass


def test_a_gated_stream_that_breaks_off_is_an_error_not_a_shorter_answer(gateway_for: GatewayFor) -> None:
    """Through ``--gate``, a reset after the packet validated gave the SDK the surface released so far, ended
    cleanly — no error, no finish, no ``[DONE]``."""
    text = json.dumps(envelope("The answer is forty-two, and here is why. [STATUS: SUCCESS]"))
    events = b"".join(b"data: " + json.dumps(text_event(text[i: i + 7])).encode() + b"\n\n"
                      for i in range(0, len(text) - 20, 7))  # fmt: skip

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=len(events) + 10_000) + events)
        time.sleep(0.3)
        reset(conn)

    with raw_loopback(serve) as upstream:
        base_url, _ = gateway_for(upstream, "--gate")
        client: Any = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        released = []
        with pytest.raises(openai.APIError, match="broke off before the reply was complete") as broke:
            for chunk in client.chat.completions.create(model="gpt-4o", messages=HI, stream=True):
                released.append(chunk.choices[0].delta.content or "")
                assert chunk.model == "gpt-4o"  # the model asked for, never the upstream's address
        assert broke.value.body["code"] == "upstream_unreachable"  # type: ignore[index]
        assert "".join(released).startswith("The answer is")  # what was judged and released came first


def test_a_client_that_leaves_stops_the_upstream_read(gateway_for: GatewayFor) -> None:
    """The gateway read the upstream to its end after its client had gone (tokens paid for nobody). Now the
    upstream's connection closes soon after the client's, and subscribers are told the stream did not finish."""
    closed: list[float] = []

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=10_000_000))
        conn.settimeout(0.2)
        for _ in range(150):  # one event every 0.2 s for 30 s, unless the gateway hangs up
            try:
                conn.sendall(b"data: " + json.dumps(text_event("word ")).encode() + b"\n\n")
                if conn.recv(1, socket.MSG_PEEK) == b"":
                    closed.append(time.monotonic())
                    return
            except TimeoutError:
                continue
            except OSError:
                closed.append(time.monotonic())
                return

    with raw_loopback(serve) as upstream:
        base_url, pub = gateway_for(upstream)
        receiver = subscribe(pub)
        with httpx.Client(timeout=30) as client, client.stream(
            "POST", f"{base_url}/chat/completions", json={"model": "m", "messages": HI, "stream": True}
        ) as reply:
            next(reply.iter_bytes())
            left = time.monotonic()
        for _ in range(100):
            if closed:
                break
            time.sleep(0.1)
        chunks = list(receiver.receive(timeout_ms=2000)) + receiver.close()
    assert closed and closed[0] - left < 5, "the gateway kept reading the upstream after its client left"
    from groundstate.wire import UpstreamError

    errors = [c.error for c in chunks if isinstance(c, UpstreamError)]
    assert errors and "the client went away" in errors[-1]["message"]


@pytest.mark.parametrize("path", ["/../../other/chat/completions", "/%2e%2e/other/chat/completions",
                                  "/x/..%2F..%2Fother", "/x/..;/admin", "/x/%2e%2e;x/admin",
                                  "/x/..%3bx/admin"])  # fmt: skip
def test_a_path_that_climbs_out_of_the_upstream_base_is_refused(gateway_for: GatewayFor, path: str) -> None:
    """Dot segments were resolved on the way: a client left ``/tenant-a/`` for ``/tenant-b/`` with the operator's
    credentials. Refused (400), and the upstream hears nothing."""
    heads: list[bytes] = []
    with raw_loopback(answer(b"HTTP/1.1 200 OK\r\n", b"{}"), heads) as upstream:
        base_url, _ = gateway_for(upstream.replace("http://", "http://operator:secret@") + "/tenant-a/v1")
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:  # as sent: no client resolves it
            raw.sendall(f"POST /v1{path} HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
                        .encode())  # fmt: skip
            reply = b""
            while chunk := raw.recv(65536):
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert b'"code": "bad_input"' in reply and heads == []


def test_an_encoded_question_mark_stays_in_the_path(gateway_for: GatewayFor) -> None:
    heads: list[bytes] = []
    with raw_loopback(answer(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n", b"{}"), heads) as upstream:
        base_url, _ = gateway_for(upstream)
        assert httpx.get(f"{base_url}/models/a%3Fb", timeout=30).status_code == 200
    assert heads[0].split(b"\r\n")[0] == b"GET /v1/models/a%3Fb HTTP/1.1"


def test_expect_100_continue_is_not_forwarded(gateway_for: GatewayFor) -> None:
    """Forwarded, it made the upstream hop wait for an interim answer the upstream need not send (30 s here)."""
    heads: list[bytes] = []
    body = sse(text_event("fine"))
    with raw_loopback(answer(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n", body), heads) as upstream:
        base_url, _ = gateway_for(upstream)
        started = time.monotonic()
        sent = {"expect": "100-continue", "content-type": "application/json"}
        reply = httpx.post(f"{base_url}/chat/completions", content=json.dumps({"model": "m", "messages": HI}),
                           headers=sent, timeout=60)  # fmt: skip
    assert reply.status_code == 200 and time.monotonic() - started < 4
    assert not [line for line in heads[0].split(b"\r\n") if line.lower().startswith(b"expect:")]


def test_a_client_that_never_finishes_its_request_does_not_hold_the_shutdown(gateway_for: GatewayFor) -> None:
    """A chunked body that never ends kept a stopped gateway running for as long as its client liked."""
    with raw_loopback(answer(b"HTTP/1.1 200 OK\r\n", b"{}")) as upstream:
        base_url, _ = gateway_for(upstream)
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
            slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
                         b"5\r\nhello\r\n")  # and never the rest
            time.sleep(0.5)
            [process] = gateway_for.processes  # type: ignore[attr-defined]
            stopped = time.monotonic()
            process.terminate()
            process.wait(timeout=30)
            assert time.monotonic() - stopped < 20


def raw_request(base_url: str, target: str, extra: str = "") -> bytes:
    """A request sent as written (no client library normalises its target), and the whole reply."""
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        raw.sendall(f"POST {target} HTTP/1.1\r\nhost: x\r\n{extra}content-length: 2\r\nconnection: close\r\n\r\n{{}}"
                    .encode())  # fmt: skip
        reply = b""
        while chunk := raw.recv(65536):
            reply += chunk
    return reply


@pytest.mark.parametrize("target", ["*@127.0.0.1:{other}/stolen", "*", "*.evil/x", "*:{other}/x"])
def test_a_target_that_is_no_path_reaches_no_host(gateway_for: GatewayFor, target: str) -> None:
    """Found by an attack: ``*@host:port/path`` was glued after ``--upstream``, making the upstream's address a user
    name and the rest another host — an open proxy to anything the gateway reaches, with the client's key (and the
    operator's, from ``user:password@``). Refused (400); neither the upstream nor the other host hears anything."""
    heads: list[bytes] = []
    stolen: list[bytes] = []
    with raw_loopback(answer(b"HTTP/1.1 200 OK\r\n", b"{}"), heads) as upstream, \
            raw_loopback(answer(b"HTTP/1.1 200 OK\r\n", b"stolen"), stolen) as other:
        base_url, _ = gateway_for(upstream)
        reply = raw_request(base_url, target.format(other=other.rsplit(":", 1)[1]), "x-api-key: CLIENT-SECRET\r\n")
    assert reply.startswith(b"HTTP/1.1 400"), reply[:300]
    assert b'"code": "bad_input"' in reply and heads == [] and stolen == []


def test_the_upstreams_query_is_kept_and_the_clients_follows_it(gateway_for: GatewayFor) -> None:
    """``--upstream .../base?api-version=1`` put the forwarded path inside its query."""
    heads: list[bytes] = []
    with raw_loopback(answer(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n", b"{}"), heads) as upstream:
        base_url, _ = gateway_for(upstream + "/base?api-version=1")
        assert httpx.get(f"{base_url}/models", params={"x": "1"}, timeout=30).status_code == 200
    assert heads[0].split(b"\r\n")[0] == b"GET /base/v1/models?api-version=1&x=1 HTTP/1.1"


def test_headers_a_connection_header_names_are_not_passed_on(gateway_for: GatewayFor) -> None:
    """They are for one connection (RFC 9110 7.6.1), either way: the upstream's reached the client."""
    heads: list[bytes] = []
    body = sse(text_event("fine"))
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: keep-alive, x-upstream-hop\r\n"
            b"x-upstream-hop: 1\r\n")  # fmt: skip
    with raw_loopback(answer(head, body), heads) as upstream:
        base_url, _ = gateway_for(upstream)
        reply = raw_request(base_url, "/v1/chat/completions", "x-client-hop: 1\r\nconnection: x-client-hop\r\n")
    assert reply.startswith(b"HTTP/1.1 200") and b"x-upstream-hop" not in reply.lower()
    assert b"x-client-hop" not in heads[0].lower()


@pytest.mark.parametrize("body", [
    sse(text_event("t0"), text_event("t1"), done=False),  # ends between events, without [DONE]
    sse(text_event("t0"), text_event("t1"), done=False) + b'data: {"choices": [{"index": 0, "delta": {"content": "ha',
])  # fmt: skip
def test_a_stream_whose_body_ends_before_the_stream_did_is_an_error(gateway_for: GatewayFor, body: bytes) -> None:
    """Found by an attack: an upstream body delimited by the connection's close (or a chunked body's last chunk)
    that stopped before ``[DONE]`` — between events or inside one — reached the SDK as a whole answer."""

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head() + body)  # connection: close — the body ends cleanly, the stream did not

    with raw_loopback(serve) as upstream:
        base_url, _ = gateway_for(upstream)
        client: Any = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        texts = []
        with pytest.raises(openai.APIError, match=r"ended (without data: \[DONE\]|inside an event)"):
            for chunk in client.chat.completions.create(model="m", messages=HI, stream=True):
                texts.append(chunk.choices[0].delta.content)
    assert texts == ["t0", "t1"]  # the whole events came first; an unfinished one never


def test_an_error_after_an_event_past_the_bound_is_an_event_of_its_own(gateway_for: GatewayFor) -> None:
    """Past 1 MiB an unfinished event is given on as it is; the error then went on its last line: inside a comment
    it vanished, and the SDK ended cleanly with part of an answer."""
    body = sse(text_event("t0"), done=False) + b": " + b"A" * (1 << 21)

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=len(body) + 10_000) + body)
        time.sleep(0.3)
        reset(conn)

    with raw_loopback(serve) as upstream:
        base_url, _ = gateway_for(upstream)
        client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        with pytest.raises(openai.APIError, match="broke off before the reply was complete"):
            for _ in client.chat.completions.create(model="m", messages=HI, stream=True):  # type: ignore[arg-type]
                pass


def test_a_stream_open_at_shutdown_is_told_so_without_a_traceback(gateway_for: GatewayFor) -> None:
    """Stopped with a stream open, the gateway printed a traceback once its grace ran out and the client's body
    just stopped. Now the stream is told in band that the gateway stopped, and the gateway exits quietly; its
    subscribers get the text it had, the same error and the stream's end (they got nothing more, and no end)."""
    from groundstate.wire import Content, FrameReceiver, StreamEnd, UpstreamError

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=10_000_000) + sse(text_event("t0"), done=False))
        time.sleep(40)

    with raw_loopback(serve) as upstream:
        base_url, pub = gateway_for(upstream)
        receiver = FrameReceiver(pub, "sub")
        time.sleep(0.5)  # the subscription reaches the publisher first
        [process] = gateway_for.processes  # type: ignore[attr-defined]
        with httpx.Client(timeout=60) as client, client.stream(
            "POST", f"{base_url}/chat/completions", json={"model": "m", "messages": HI, "stream": True}
        ) as reply:
            chunks = reply.iter_bytes()
            received = next(chunks)
            process.terminate()
            received += b"".join(chunks)
        process.wait(timeout=30)
        published = list(receiver.receive(timeout_ms=1000)) + receiver.close()
    assert b'"code": "upstream_unreachable"' in received and b"the gateway stopped" in received
    assert process.stderr is not None and b"Traceback" not in process.stderr.read()
    assert b"".join(bytes(c.tokens) for c in published if isinstance(c, Content)) == b"t0"
    [error] = [c.error for c in published if isinstance(c, UpstreamError)]
    assert "the gateway stopped" in error["message"] and isinstance(published[-1], StreamEnd)


@pytest.mark.parametrize("after", [b": keep-alive\n\n", b"retry: 3000\n\n", b": ping\n\n" * 3])
def test_what_follows_the_end_marker_in_a_read_of_its_own_is_no_break(gateway_for: GatewayFor, after: bytes) -> None:
    """Found by an attack: a keep-alive comment (sse-starlette sends them) or a ``retry:`` line arriving in its own
    read after ``[DONE]`` made a complete answer end with an error — only the last read was looked at."""
    body = sse(text_event("whole"))

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=len(body) + len(after)) + body)
        time.sleep(0.2)
        conn.sendall(after)

    with raw_loopback(serve) as upstream:
        base_url, _ = gateway_for(upstream)
        received = chat(base_url).content
    assert received == body + after  # unchanged, no error


def test_a_final_event_over_a_mib_is_no_break(gateway_for: GatewayFor) -> None:
    """Found by an attack: a Responses stream's ``response.completed`` (it repeats the whole output) past 1 MiB is
    given on in parts, and only its tail was looked at: a complete answer ended with an error."""
    done = {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x" * (3 << 19)}]}],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}}  # fmt: skip
    body = (b'event: response.created\ndata: {"type": "response.created", "response": {"id": "r"}}\n\n'
            b"event: response.completed\ndata: " + json.dumps(done).encode() + b"\n\n")  # fmt: skip

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=len(body)) + body)

    with raw_loopback(serve) as upstream:
        base_url, _ = gateway_for(upstream, "--api", "openai-responses")
        reply = httpx.post(f"{base_url}/responses", json={"model": "m", "input": "hi", "stream": True}, timeout=60)
    assert reply.content == body


def test_a_long_run_of_comments_after_the_end_keeps_the_gateway_serving(gateway_for: GatewayFor) -> None:
    """Found by an attack: 300,000 comments after ``[DONE]`` took 20 s to look through, the whole gateway (every
    other client) waiting meanwhile. They are read linearly now, in turns that leave the loop to the others."""
    body = sse(text_event("whole")) + b":\n\n" * 300_000

    def serve(conn: socket.socket) -> None:
        conn.sendall(stream_head(length=len(body)) + body)

    with raw_loopback(serve) as upstream:
        base_url, _ = gateway_for(upstream)
        started = time.monotonic()
        received = chat(base_url).content
        took = time.monotonic() - started
        assert received == body and took < 10, took


def test_ctrl_c_stops_the_gateway_with_the_status_of_an_interrupt(gateway_for: GatewayFor) -> None:
    """Found by an attack: the gateway exited 0 on SIGINT (uvicorn.run swallowed it) where `serve` and
    `mcp serve` exit 130, so a supervisor could not tell an interrupted gateway from one that finished."""
    with raw_loopback(answer(b"HTTP/1.1 200 OK\r\n", b"{}")) as upstream:
        gateway_for(upstream)
        [process] = gateway_for.processes  # type: ignore[attr-defined]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
        assert b"Traceback" not in process.stderr.read()


def test_a_gateway_whose_address_is_taken_says_so_and_fails(gateway_for: GatewayFor, tmp_path: Any) -> None:
    with raw_loopback(answer(b"HTTP/1.1 200 OK\r\n", b"{}")) as upstream:
        base_url, _ = gateway_for(upstream)
        listen = base_url.removeprefix("http://").removesuffix("/v1")
        taken = subprocess.run([sys.executable, "-m", "groundstate", "gateway", "--upstream", upstream, "--listen",
                                listen], capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
        assert taken.returncode == 3, taken.stdout + taken.stderr
        assert "address already in use" in taken.stderr.lower() and "Traceback" not in taken.stderr
