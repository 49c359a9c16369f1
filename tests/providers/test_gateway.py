"""The gateway, with the official openai SDK as its client: against a scripted upstream, and the local model.

The client receives the upstream stream unchanged; a ZMQ subscriber receives the same response as SIGIL frames.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

from groundstate.config import default_db_url
from groundstate.store import Operators
from groundstate.wire import Content, FrameReceiver, Hello, Reset, StreamEnd, UpstreamError

from ..loopback import Reply, Respond, loopback
from .conftest import GatewayFor, Script

TRANSCRIPT = (Path(__file__).parent / "transcripts" / "openai-chat" / "text.sse").read_bytes()


def subscribe(endpoint: str) -> FrameReceiver:
    receiver = FrameReceiver(endpoint, "sub")
    time.sleep(0.5)  # let the subscription reach the publisher before anything is published
    return receiver


def test_proxied_stream_is_unchanged_and_published(server: tuple[str, Script], gateway_for: GatewayFor) -> None:
    upstream, script = server
    script.responses = [(200, {}, TRANSCRIPT)]
    base_url, pub = gateway_for(upstream)
    receiver = subscribe(pub)
    client = OpenAI(base_url=base_url, api_key="sk-test")
    stream = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Hello 日本"
    assert script.requests[0]["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert {k.lower(): v for k, v in script.requests[0]["headers"].items()}["authorization"] == "Bearer sk-test"
    chunks = list(receiver.receive(timeout_ms=2000)) + receiver.close()
    published = b"".join(bytes(c.tokens) for c in chunks if isinstance(c, Content))
    assert published.decode() == "Hello 日本"
    assert isinstance(chunks[0], Hello) and any(isinstance(c, StreamEnd) for c in chunks)


def test_what_one_read_carries_is_published_in_one_frame(gateway_for: GatewayFor) -> None:
    """A provider that streams a token per event, faster than the gateway reads: the subscribers get the events of
    each read together (a handful of chunks, not one per token) and exactly the text the client read."""
    words = [f"w{i} " for i in range(300)]
    events = [{"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]} for w in words]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"

    def respond(path: str, headers: dict[str, str], request: bytes) -> Reply:
        return Reply(200, {"content-type": "text/event-stream"}, body, chunk=len(body))  # one write

    with loopback(respond) as upstream:
        base_url, pub = gateway_for(upstream)
        receiver = subscribe(pub)
        client = OpenAI(base_url=base_url, api_key="sk-test")
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        chunks = list(receiver.receive(timeout_ms=2000)) + receiver.close()
    contents = [c for c in chunks if isinstance(c, Content)]
    assert text == "".join(words) == b"".join(bytes(c.tokens) for c in contents).decode()
    assert len(contents) <= 20, f"{len(contents)} chunks for one read of {len(words)} events"


def test_upstream_http_error_passes_through_and_is_published_classified(
    server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    upstream, script = server
    body = b'{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}'
    script.responses = [(429, {"content-type": "application/json", "retry-after": "3"}, body)]
    base_url, pub = gateway_for(upstream)
    receiver = subscribe(pub)
    client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(Exception) as info:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert getattr(info.value, "status_code", None) == 429
    chunks = list(receiver.receive(timeout_ms=2000)) + receiver.close()
    errors = [c.error for c in chunks if isinstance(c, UpstreamError)]
    assert [(e["plane"], e["retry_after_s"]) for e in errors] == [("rate", 3.0)]
    assert [c.reason for c in chunks if isinstance(c, Reset)] == ["UpstreamError"]


def test_local_model_behind_an_openai_endpoint(gateway_for) -> None:  # type: ignore[no-untyped-def]
    base_url, pub = gateway_for("local")
    receiver = subscribe(pub)
    client = OpenAI(base_url=base_url, api_key="unused")
    stream = client.chat.completions.create(
        model="local", messages=[{"role": "user", "content": "Say hi."}], stream=True, max_tokens=16
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.strip()
    reply = client.chat.completions.create(
        model="local", messages=[{"role": "user", "content": "Say hi."}], max_tokens=16
    )
    assert reply.choices[0].message.content == text  # greedy decoding: the same answer
    chunks = list(receiver.receive(timeout_ms=3000)) + receiver.close()
    hellos = [c for c in chunks if isinstance(c, Hello)]
    assert hellos and hellos[0].vocabulary.startswith("gguf:SmolLM2")
    assert sum(len(c.tokens) for c in chunks if isinstance(c, Content)) > 0


def scrape(base_url: str, token: str | None) -> tuple[int, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """GET /metrics; the samples as {(name, sorted labels): value}, parsed by prometheus_client's parser."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(base_url.removesuffix("/v1") + "/metrics", headers=headers, timeout=10)
    if response.status_code != 200:
        return response.status_code, {}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(response.text) for s in family.samples}  # fmt: skip
    return 200, samples


def test_the_gateway_serves_metrics_behind_the_token(
    tmp_path: Path, server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    upstream, script = server
    refused = b'{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}'
    script.responses = [(200, {}, TRANSCRIPT), (429, {"content-type": "application/json"}, refused)]
    base_url, _ = gateway_for(upstream)
    client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    stream = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello 日本"
    with pytest.raises(Exception, match="429"):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert scrape(base_url, None)[0] == 401 and scrape(base_url, "wrong")[0] == 401
    admin_token = (tmp_path / "home" / "console.token").read_text().strip()
    operators = Operators(default_db_url(tmp_path / "home"))
    admin = operators.authenticate(admin_token)  # the gateway made the console's token the first admin
    assert admin is not None and admin.role == "admin"
    _, viewer = operators.add("vic", "viewer", admin)  # a viewer may see the metrics
    status, samples = scrape(base_url, viewer)
    assert status == 200
    operators.remove("vic", admin)
    assert scrape(base_url, viewer)[0] == 401  # a removed account's token stops working at once
    model = f"openai-chat:gpt-4o@{upstream.rstrip('/')}"
    labels = (("model", model), ("outcome", "ok"), ("provider", "openai-chat"))
    assert samples[("groundstate_model_calls_total", labels)] == 1
    assert samples[("groundstate_provider_errors_total", (("model", model), ("plane", "rate"),
                                                          ("provider", "openai-chat")))] == 1  # fmt: skip
    assert samples[("groundstate_gateway_requests_total", (("provider", "openai-chat"), ("status", "429")))] == 1


def test_metrics_open_serves_them_without_the_token(
    tmp_path: Path, server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    upstream, _ = server
    (tmp_path / "open.toml").write_text("[metrics]\nopen = true\n")
    base_url, _ = gateway_for(upstream, "--config", "open.toml")
    status, samples = scrape(base_url, None)
    assert status == 200 and samples == {}  # nothing counted yet, but served to anyone
    assert not (tmp_path / "home" / "console.token").exists()  # no token was needed


def _paced_events(words: list[str], pace: float) -> Respond:
    """An upstream that streams one word per event, one event per write, ``pace`` seconds apart."""
    events = [{"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]} for w in words]
    pieces = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]
    size = max(map(len, pieces))
    body = b"".join(piece.ljust(size, b"\n") for piece in pieces)  # blank lines pad each event to one write

    def respond(path: str, headers: dict[str, str], request: bytes) -> Reply:
        return Reply(200, {"content-type": "text/event-stream"}, body, chunk=size, pace=pace)

    return respond


def _published(gateway_for: GatewayFor, respond: Respond, *options: str) -> tuple[str, list[Content]]:
    with loopback(respond) as upstream:
        base_url, pub = gateway_for(upstream, *options)
        receiver = subscribe(pub)
        client = OpenAI(base_url=base_url, api_key="sk-test")
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        chunks = list(receiver.receive(timeout_ms=2000)) + receiver.close()
    return text, [c for c in chunks if isinstance(c, Content)]


@pytest.mark.alone
def test_a_fast_stream_of_one_event_per_read_is_published_in_held_frames(gateway_for: GatewayFor) -> None:
    """An upstream whose every event arrives in a write of its own, a millisecond apart: with --publish-hold-ms 0
    the subscribers get about a frame per event; with the default hold (5 ms) fewer; with 20 ms a frame per twenty
    or so — the same text every time."""
    words = [f"w{i} " for i in range(120)]
    runs = {}
    for options in (("--publish-hold-ms", "0"), (), ("--publish-hold-ms", "20")):
        text, runs[options] = _published(gateway_for, _paced_events(words, 0.001), *options)
        assert text == "".join(words) == b"".join(bytes(c.tokens) for c in runs[options]).decode(), options
    each, default, held = (len(chunks) for chunks in runs.values())
    assert each >= 60, f"{each} chunks for {len(words)} events a millisecond apart, without a hold"
    assert default < each and held <= 30, (each, default, held)


@pytest.mark.alone
def test_held_text_is_published_when_due_while_the_stream_pauses(gateway_for: GatewayFor) -> None:
    """The hold is a bound, not a wait for the next event: a stream that pauses for a second after its first words
    has them published within the hold (here 50 ms), long before the pause ends."""
    words = ["first ", "words ", "then ", "a ", "pause"]
    events = [{"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]} for w in words]
    head = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events[:2])
    tail = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events[2:]) + b"data: [DONE]\n\n"

    def respond(path: str, headers: dict[str, str], request: bytes) -> Reply:
        return Reply(200, {"content-type": "text/event-stream"}, head + tail, chunk=len(head), pace=1.0)

    with loopback(respond) as upstream:
        base_url, pub = gateway_for(upstream, "--publish-hold-ms", "50")
        receiver = subscribe(pub)
        started = time.monotonic()
        request = threading.Thread(target=lambda: httpx.post(
            f"{base_url}/chat/completions", json={"model": "m", "messages": [], "stream": True}, timeout=10))
        request.start()
        first: list[tuple[float, bytes]] = []
        while time.monotonic() - started < 0.9 and not first:
            for chunk in receiver.receive(timeout_ms=100):
                if isinstance(chunk, Content):
                    first.append((time.monotonic() - started, bytes(chunk.tokens)))
        request.join()
        receiver.close()
    assert first and first[0][1] == b"first words ", first


def test_the_publish_hold_is_checked(tmp_path: Path) -> None:
    """A hold that is negative, not a number or past a second is refused before the gateway starts, by name."""
    for value in ("-1", "nan", "1001", "1000.0000001"):
        command = [sys.executable, "-m", "groundstate", "gateway", "--upstream", "http://127.0.0.1:9",
                   "--publish-hold-ms", value]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.returncode == 2 and "--publish-hold-ms must be 0 to 1000, not " in done.stderr, (value, done.stderr)
        assert "Traceback" not in done.stderr
        assert value in done.stderr or value == "nan", done.stderr  # as typed, not rounded to 1000


def test_the_gateway_refuses_a_hold_it_is_given_in_code_once() -> None:
    """Only the command line checked the hold: a Gateway built in code with a negative one answered every request
    with a 500. It is refused where the gateway is built, with the command line's bounds."""
    from groundstate.providers import Gateway, HoldRefused

    for hold in (-1.0, float("nan"), float("inf"), 1.5, True):
        with pytest.raises(HoldRefused, match="publish hold is 0 to 1 seconds"):
            Gateway("http://127.0.0.1:9", publish_hold=hold)
    assert Gateway("http://127.0.0.1:9", publish_hold=1.0).publish_hold == 1.0


def test_what_the_gateway_started_with_is_out_of_the_collectors_reach_once_it_serves() -> None:
    """The gateway's start (its imports) is frozen out of the garbage collector (``gc.freeze``) before it serves:
    each full collection walked it all again, a quarter of the gateway's CPU per stream (docs/benchmarks.md)."""
    import asyncio
    import gc
    from collections.abc import MutableMapping
    from typing import Any

    from groundstate.providers import Gateway

    gateway = Gateway("http://127.0.0.1:9")
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[str] = []
    frozen_before = gc.get_freeze_count()

    async def receive() -> dict[str, str]:
        return next(messages)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message["type"])
        if message["type"] == "lifespan.startup.complete":
            sent.append(f"frozen {gc.get_freeze_count()}")

    try:
        asyncio.run(gateway({"type": "lifespan"}, receive, send))
    finally:
        gc.unfreeze()
    assert sent[0] == "lifespan.startup.complete" and sent[-1] == "lifespan.shutdown.complete"
    assert int(sent[1].split()[1]) > max(frozen_before, 10_000)  # its modules' objects, not a handful
