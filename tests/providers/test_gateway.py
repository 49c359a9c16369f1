"""The gateway, with the official openai SDK as its client: against a scripted upstream, and the local model.

The client receives the upstream stream unchanged; a ZMQ subscriber receives the same response as SIGIL frames.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from groundstate.wire import Content, Hello, Reset, StreamEnd, UpstreamError
from groundstate.wire.zmq_transport import FrameReceiver

from .conftest import Script

TRANSCRIPT = (Path(__file__).parent / "transcripts" / "openai-chat" / "text.sse").read_bytes()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


GatewayFor = Callable[[str], tuple[str, str]]  # upstream URL -> (the gateway's base URL, its publish address)


@pytest.fixture
def gateway_for(request: pytest.FixtureRequest) -> Iterator[GatewayFor]:
    processes: list[subprocess.Popen[bytes]] = []

    def start(upstream: str) -> tuple[str, str]:
        port, pub = free_port(), free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "groundstate", "gateway", "--upstream", upstream,
             "--listen", f"127.0.0.1:{port}", "--publish", f"tcp://127.0.0.1:{pub}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        processes.append(process)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return f"http://127.0.0.1:{port}/v1", f"tcp://127.0.0.1:{pub}"
            except OSError:
                time.sleep(0.1)
        raise AssertionError("the gateway did not start")

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


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
