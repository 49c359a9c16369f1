"""Without subscribers the gateway relays a reply's events first and parses them for the metrics before its end
(HELD_FOR_METRICS bytes at most; a longer reply is parsed as it passes): the client gets every byte unchanged either
way, and the metrics count the same tokens and in-stream errors."""

from __future__ import annotations

import asyncio
import importlib
import socket
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from groundstate.providers import Gateway

from ..loopback import raw_loopback
from .conftest import Script

TRANSCRIPTS = Path(__file__).parent / "transcripts" / "openai-chat"
TEXT = (TRANSCRIPTS / "text.sse").read_bytes()  # ends with a usage chunk: 9 input, 3 output tokens
IN_STREAM_ERROR = (TRANSCRIPTS / "azure-instream-error.sse").read_bytes()


def relay(
    gateway: Gateway, sent: list[MutableMapping[str, Any]] | None = None
) -> tuple[bytes, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """One streamed request through the gateway's ASGI app, then a scrape of ``/metrics`` at once (in the same loop,
    while the reply may still be being counted: a scrape waits for that): what the client received, and the
    metrics scraped. ``sent``: the ASGI messages the client's side was given, when a list is passed."""
    sent = [] if sent is None else sent
    scraped: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b'{"model": "gpt-4o", "stream": true}', "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def scrape(message: MutableMapping[str, Any]) -> None:
        scraped.append(message)

    scope = {"type": "http", "method": "POST", "path": "/chat/completions", "query_string": b"",
             "headers": [(b"content-type", b"application/json")]}  # fmt: skip
    metrics = {"type": "http", "method": "GET", "path": "/metrics", "query_string": b"", "headers": []}

    async def both() -> None:
        await gateway(scope, receive, send)
        await gateway(metrics, receive, scrape)
        await gateway.close()

    asyncio.run(both())
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    text = b"".join(m.get("body", b"") for m in scraped if m["type"] == "http.response.body").decode()
    families = text_string_to_metric_families(text)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
    return body, samples


@pytest.mark.parametrize("held", [1 << 20, 50])  # all held for after; or more than that, parsed as it passes
def test_the_relayed_reply_is_unchanged_and_its_metrics_counted(
    server: tuple[str, Script], monkeypatch: pytest.MonkeyPatch, held: int
) -> None:
    monkeypatch.setattr(importlib.import_module("groundstate.providers.gateway"), "HELD_FOR_METRICS", held)
    upstream, script = server
    script.responses = [(200, {}, TEXT), (200, {}, IN_STREAM_ERROR)]
    gateway = Gateway(upstream)
    model = f"openai-chat:gpt-4o@{upstream.rstrip('/')}"
    body, samples = relay(gateway)
    assert body == TEXT
    tokens = {direction: samples[("groundstate_model_tokens_total", (("direction", direction), ("model", model),
                                                                     ("provider", "openai-chat")))]
              for direction in ("input", "output")}  # fmt: skip
    assert tokens == {"input": 9, "output": 3}
    assert samples[("groundstate_model_calls_total", (("model", model), ("outcome", "ok"),
                                                      ("provider", "openai-chat")))] == 1  # fmt: skip
    body, samples = relay(gateway)
    assert body == IN_STREAM_ERROR
    assert samples[("groundstate_model_calls_total", (("model", model), ("outcome", "error"),
                                                      ("provider", "openai-chat")))] == 1  # fmt: skip


def test_a_reply_read_whole_ends_in_the_write_of_its_last_piece() -> None:
    """A reply whose end was read with its last bytes (here all of it in one write of the upstream) is given on
    with that last piece and its end in one ASGI message, which the server writes as one: the end was a write of
    its own, one system call per stream more (7 % of the gateway's CPU at 100 streams). Nothing else changes: the
    client's bytes are the upstream's, and the metrics count them."""
    head = f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len(TEXT)}\r\n\r\n"

    def answer(connection: socket.socket) -> None:
        connection.sendall(head.encode() + TEXT)

    sent: list[MutableMapping[str, Any]] = []
    with raw_loopback(answer) as upstream:
        body, samples = relay(Gateway(upstream), sent)
    assert body == TEXT
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert bodies[-1]["body"] and not bodies[-1].get("more_body"), bodies
    assert TEXT.endswith(bodies[-1]["body"])
    assert any(name == "groundstate_model_tokens_total" and value == 9 for (name, _), value in samples.items())


def whole_reply_upstream(body: bytes) -> bytes:
    """The head and ``body`` of a stream in one write: the gateway reads it whole, its last piece held for the end."""
    return f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body


def chunk(payload: str) -> bytes:
    return b"data: " + payload.encode() + b"\n\n"


TEXT_CHUNK = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}'  # noqa: E501


@pytest.mark.parametrize("count", ["-5", '"abc"', "[1]", "1.5", "true", "1e308"])
def test_a_usage_count_that_is_no_count_is_not_counted_and_the_reply_arrives_whole(count: str) -> None:
    """An upstream's usage of -5 tokens (or a string, a list, 1.5, true) made the metrics' counter raise before the
    reply's last piece was written: the client got the head and none of the body, and a traceback went to the log.
    Now such a count is no count (as in a whole reply's usage): the reply arrives unchanged and the call is ok."""
    body = chunk(TEXT_CHUNK) + chunk('{"choices":[],"usage":{"prompt_tokens":' + count + ',"completion_tokens":2}}')
    body += b"data: [DONE]\n\n"
    with raw_loopback(lambda connection: connection.sendall(whole_reply_upstream(body))) as upstream:
        received, samples = relay(Gateway(upstream))
    assert received == body
    tokens = {dict(labels)["direction"]: value for (name, labels), value in samples.items()
              if name == "groundstate_model_tokens_total"}  # fmt: skip
    assert tokens == {"input": 0, "output": 2}
    outcomes = {dict(labels)["outcome"]: value for (name, labels), value in samples.items()
                if name == "groundstate_model_calls_total"}  # fmt: skip
    assert outcomes == {"ok": 1}


@pytest.mark.parametrize("number", ["1e999", "-9e400", "1E+999"])
def test_a_number_past_what_json_is_read_as_is_an_error_counted_not_text_skipped(number: str) -> None:
    """A text chunk whose ``created`` is 1e999 is no chunk the parser reads (a number past a float's range): a full
    parse counts the call as failed. The skim of text chunks took it for text (exponents of 3 digits) and the call
    was counted ok; now only numbers that stay finite are skimmed."""
    odd = TEXT_CHUNK.replace('"created":1', f'"created":{number}')
    body = chunk(TEXT_CHUNK) + chunk(odd) + chunk(TEXT_CHUNK) + b"data: [DONE]\n\n"
    with raw_loopback(lambda connection: connection.sendall(whole_reply_upstream(body))) as upstream:
        received, samples = relay(Gateway(upstream))
    assert received == body
    outcomes = {dict(labels)["outcome"]: value for (name, labels), value in samples.items()
                if name == "groundstate_model_calls_total"}  # fmt: skip
    assert outcomes == {"error": 1}
