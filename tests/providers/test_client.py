"""The streaming client against a real HTTP server on loopback that replays scripted responses."""

from __future__ import annotations

import asyncio
import importlib
import json
import ssl
from pathlib import Path
from typing import Any

import pytest

from groundstate.providers import RetryPolicy, StreamClient, merge_deltas, to_json

from .conftest import Script

TRANSCRIPTS = Path(__file__).parent / "transcripts"
OK = (TRANSCRIPTS / "openai-chat" / "text.sse").read_bytes()
OVERLOADED_FIRST = (
    b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n'
)
ANTHROPIC_OK = (TRANSCRIPTS / "anthropic" / "thinking-text-tools.sse").read_bytes()
ANTHROPIC_PARTIAL_THEN_OVERLOAD = (TRANSCRIPTS / "anthropic" / "overloaded-mid-stream.sse").read_bytes()


def collect(client: StreamClient, body: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], list[float]]:
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:  # the wait is recorded, not spent
        delays.append(seconds)

    client.sleep = fake_sleep

    async def run() -> list[Any]:
        return [event async for event in client.stream(body or {"model": "m", "stream": True})]

    events = asyncio.run(run())
    return [to_json(e) for e in merge_deltas(events)], delays


def openai_error(code: str, message: str = "x", kind: str = "requests") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


def test_stream_and_auth_header(server: tuple[str, Script]) -> None:
    url, script = server
    script.responses = [(200, {}, OK)]
    events, delays = collect(StreamClient(url, api_key="sk-test"))
    assert events[0] == {"type": "text", "text": "Hello 日本"} and delays == []
    assert script.requests[0]["path"] == "/chat/completions"
    assert script.requests[0]["headers"]["authorization"] == "Bearer sk-test"


def test_rate_limit_is_retried_after_the_hinted_delay(server: tuple[str, Script]) -> None:
    url, script = server
    script.responses = [(429, {"retry-after-ms": "250"}, openai_error("rate_limit_exceeded")), (200, {}, OK)]
    client = StreamClient(url)
    events, delays = collect(client)
    assert delays == [0.25] and [a.plane for a in client.attempts] == ["rate"]
    assert events[0]["type"] == "text" and len(script.requests) == 2


@pytest.mark.parametrize(
    ("status", "body", "plane"),
    [
        (401, openai_error("invalid_api_key", kind="invalid_request_error"), "auth"),
        (429, openai_error("insufficient_quota", "You exceeded your current quota", "insufficient_quota"), "quota"),
        (400, openai_error("context_length_exceeded", "maximum context length", "invalid_request_error"), "request"),
        (429, b"", "ambiguous"),
    ],
)
def test_never_retried(server: tuple[str, Script], status: int, body: bytes, plane: str) -> None:
    url, script = server
    script.responses = [(status, {"content-type": "application/json"}, body), (200, {}, OK)]
    events, delays = collect(StreamClient(url))
    assert [e["type"] for e in events] == ["error"] and events[0]["plane"] == plane
    assert delays == [] and len(script.requests) == 1


def test_server_errors_back_off_then_give_up(server: tuple[str, Script]) -> None:
    url, script = server
    script.responses = [(503, {}, b"The engine is currently overloaded")] * 3
    client = StreamClient(url, retry=RetryPolicy(max_attempts=3, base_delay_s=0.5))
    events, delays = collect(client)
    assert delays == [0.5, 1.0] and events == [
        {"type": "error", "plane": "overload", "retryable": True, "retry_after_s": None, "status": 503, "code": None,
         "message": "The engine is currently overloaded"}
    ]  # fmt: skip


def test_in_stream_overload_before_content_is_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.responses = [(200, {}, OVERLOADED_FIRST), (200, {}, ANTHROPIC_OK)]
    client = StreamClient(url, api="anthropic", api_key="k")
    events, delays = collect(client)
    assert [a.plane for a in client.attempts] == ["overload"] and len(delays) == 1
    assert [e["type"] for e in events] == ["think", "text", "tool_call", "tool_call", "finish", "usage"]
    assert script.requests[0]["headers"]["x-api-key"] == "k" and script.requests[0]["path"] == "/messages"


def test_failure_after_content_is_surfaced_not_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.responses = [(200, {}, ANTHROPIC_PARTIAL_THEN_OVERLOAD), (200, {}, ANTHROPIC_OK)]
    client = StreamClient(url, api="anthropic")
    events, delays = collect(client)
    assert [e["type"] for e in events] == ["text", "error", "truncated"]
    assert events[1]["plane"] == "overload" and delays == [] and len(script.requests) == 1


EXPECTED = sorted(TRANSCRIPTS.glob("*/*.expected"))


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_every_transcript_through_the_client(server: tuple[str, Script], expected: Path) -> None:
    """Each API's stream replayed over HTTP gives the adapter's events; only a retryable error first is retried."""
    api = expected.parent.name
    body = next(p for p in expected.parent.glob(expected.stem + ".*") if p.suffix != ".expected").read_bytes()
    url, script = server
    script.responses = [(200, {}, body)] * 2
    events, delays = collect(StreamClient(url, api=api, retry=RetryPolicy(max_attempts=2)))
    wanted = [json.loads(line) for line in expected.read_text(encoding="utf-8").splitlines()]
    assert events == wanted
    first = next((e for e in wanted if e["type"] not in ("finish", "usage")), None)
    retried = first is not None and first["type"] == "error" and first["retryable"] is True
    assert len(script.requests) == (2 if retried else 1) and len(delays) == (1 if retried else 0)
    assert (
        script.requests[0]["path"]
        == {
            "openai-chat": "/chat/completions",
            "openai-responses": "/responses",
            "anthropic": "/messages",
            "ollama": "/api/chat",
        }[api]
    )


def test_connection_refused_is_retried_then_reported() -> None:
    client = StreamClient("http://127.0.0.1:9", retry=RetryPolicy(max_attempts=2, base_delay_s=0.1))
    events, delays = collect(client)
    assert delays == [0.1]
    assert [(e["type"], e["plane"], e["code"]) for e in events] == [("error", "server", "ConnectError")]
    assert [a.code for a in client.attempts] == ["ConnectError"]


def test_the_certificate_bundle_is_loaded_once_per_process_not_per_call(
    server: tuple[str, Script], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the CA bundle costs ~20 ms; each model call used to pay it with its new client (bench/scale)."""
    client_module = importlib.import_module("groundstate.providers.client")
    client_module.tls_context.cache_clear()
    loads = []
    real = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        real(context, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    url, script = server
    script.responses = [(200, {}, OK)] * 3
    for _ in range(3):
        events, _ = collect(StreamClient(url))
        assert events[0] == {"type": "text", "text": "Hello 日本"}
    assert len(loads) == 1
