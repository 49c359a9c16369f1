"""Hostile provider bytes: nesting, surrogates, non-finite advice, odd shapes, odd headers, endless lines.

Every case goes through a public surface (``groundstate providers parse``, the gateway on loopback, the parsers'
own API) and asserts the outcome is a typed event or error — never a traceback, never non-JSON output."""

from __future__ import annotations

import asyncio
import http.client
import json
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from groundstate.providers import Finish, OllamaAdapter, SSEParser, StreamClient, TextDelta, ThinkDelta, ToolCall

from ..loopback import Reply, loopback
from .conftest import GatewayFor, Script, free_port

DEEP = "[" * 50_000 + "]" * 50_000


def parse(tmp_path: Path, body: bytes, *args: str, headers: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    source = tmp_path / "body"
    source.write_bytes(body)
    extra = []
    if headers is not None:
        (tmp_path / "headers.json").write_text(json.dumps(headers))
        extra = ["--headers", str(tmp_path / "headers.json")]
    done = subprocess.run([sys.executable, "-m", "groundstate", "providers", "parse", str(source), *args, *extra],
                          capture_output=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    lines = done.stdout.decode("utf-8").splitlines()
    return [json.loads(line, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c))) for line in lines]


def sse(*payloads: str) -> bytes:
    return "".join(f"data: {p}\n\n" for p in payloads).encode()


def test_deeply_nested_data_lines_and_error_bodies_are_typed_errors(tmp_path: Path) -> None:
    events = parse(tmp_path, sse(DEEP, '{"choices": [{"index": 0, "delta": {"content": "ok"}}]}'), "--api",
                   "openai-chat")  # fmt: skip
    assert events[0]["type"] == "error" and events[0]["plane"] == "ambiguous"
    assert {"type": "text", "text": "ok"} in events
    [error] = parse(tmp_path, DEEP.encode(), "--api", "openai-chat", "--status", "500")
    assert error["plane"] == "server"


def test_lone_surrogates_become_replacement_characters_and_output_stays_strict_json(tmp_path: Path) -> None:
    body = sse('{"choices": [{"index": 0, "delta": {"content": "a\\ud800b"}}]}',
               '{"choices": [{"index": 0, "delta": {"content": "\\udc00"}, "finish_reason": "stop"}]}')  # fmt: skip
    events = parse(tmp_path, body, "--api", "openai-chat")
    assert "".join(e.get("text", "") for e in events if e["type"] == "text") == "a\ufffdb\ufffd"  # as bad UTF-8 is


def chat_event(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def test_a_character_split_across_stream_chunks_arrives_whole_through_the_client() -> None:
    """Issue 31: a streaming provider sends a character outside the BMP as a JSON surrogate pair, token by token — its
    two halves in two events (``"\\ud83d"`` then ``"\\ude00"``) — and UTF-8 characters cut by the network's chunks.
    The halves reached the model backend as two lone surrogates, which no UTF-8 encoder takes: the agent failed
    ("surrogates not allowed"). Through the streaming client on a loopback provider: every text, thought and tool call
    arrives whole, and all of it encodes."""
    events = [chat_event(reasoning_content="think \ud83e"), chat_event(reasoning_content="\udd14 ok"),
              chat_event(content="smile \ud83d"), chat_event(content="\ude00 caf\u00e9 "),
              chat_event(content="\U0001f600 raw \u00e9 \ud83d"),  # raw UTF-8 (cut by the 3-byte writes), then a half
              chat_event(content="\ude03"),
              chat_event(tool_calls=[{"index": 0, "id": "c1",
                                      "function": {"name": "note", "arguments": '{"t": "\ud83d'}}]),
              chat_event(tool_calls=[{"index": 0, "function": {"arguments": '\ude00"}'}}]),
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]  # fmt: skip
    body = b"".join(b"data: " + json.dumps(e, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n\n"
                    for e in events) + b"data: [DONE]\n\n"  # fmt: skip
    with loopback(lambda *_: Reply(body=body, chunk=3)) as url:

        async def collect() -> list[Any]:
            client = StreamClient(url, api="openai-chat")
            return [event async for event in client.stream({"model": "m", "messages": [], "stream": True})]

        received = asyncio.run(asyncio.wait_for(collect(), 30))
    text = "".join(e.text for e in received if isinstance(e, TextDelta))
    thought = "".join(e.text for e in received if isinstance(e, ThinkDelta))
    [call] = [e for e in received if isinstance(e, ToolCall)]
    assert text == "smile \U0001f600 caf\u00e9 \U0001f600 raw \u00e9 \U0001f603"
    assert thought == "think \U0001f914 ok"
    assert call.arguments == {"t": "\U0001f600"} and call.arguments_error is None
    for part in (text, thought, call.raw_arguments):
        part.encode("utf-8")  # what failed the backend: a lone surrogate cannot be encoded
    assert [e.reason for e in received if isinstance(e, Finish)] == ["stop"]


def test_a_split_pair_in_an_ollama_stream_arrives_whole_and_a_half_left_at_the_end_is_a_replacement() -> None:
    lines = [{"message": {"content": "a \ud83d"}}, {"message": {"content": "\ude00 b \ud83d"}},
             {"done": True, "done_reason": "stop"}]  # fmt: skip
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    with loopback(lambda *_: Reply(body=body, chunk=5, headers={"content-type": "application/x-ndjson"})) as url:

        async def collect() -> list[Any]:
            client = StreamClient(url, api="ollama")
            return [event async for event in client.stream({"model": "m", "messages": []})]

        received = asyncio.run(asyncio.wait_for(collect(), 30))
    assert "".join(e.text for e in received if isinstance(e, TextDelta)) == "a \U0001f600 b \ufffd"


def test_huge_retry_advice_is_capped_and_finite(tmp_path: Path) -> None:
    body = b'{"error": {"message": "slow down", "type": "rate_limit_error"}}'
    [error] = parse(tmp_path, body, "--api", "anthropic", "--status", "429", headers={"retry-after": "1e400"})
    assert error["retry_after_s"] == 86_400.0
    odd = {"retry-after-ms": 5, "x-request-id": ["a"]}
    [error] = parse(tmp_path, body, "--api", "anthropic", "--status", "429", headers=odd)
    assert error["retry_after_s"] == 0.005  # a number where a string belongs is read as its text


def test_odd_shapes_are_reported_not_raised(tmp_path: Path) -> None:
    body = sse('{"type": "response.completed", "response": "done"}')
    events = parse(tmp_path, body, "--api", "openai-responses")
    assert events[0]["type"] == "finish"  # a response that is not an object: finished, nothing raised
    body = sse('{"type": "response.output_item.added", "item": [1], "output_index": 0}',
               '{"choices": "nope"}')  # fmt: skip
    for api in ("openai-responses", "openai-chat"):
        events = parse(tmp_path, body, "--api", api)
        assert events and all(e["type"] in ("error", "truncated", "finish") for e in events)


def test_one_reasoning_in_two_fields_is_one_thinking_delta(tmp_path: Path) -> None:
    body = sse('{"choices": [{"index": 0, "delta": {"reasoning": "hmm", "reasoning_content": "hmm"}}]}')
    events = parse(tmp_path, body, "--api", "openai-chat")
    assert [e for e in events if e["type"] == "think"] == [{"type": "think", "text": "hmm"}]


def test_think_tags_opened_by_the_template_and_after_text(tmp_path: Path) -> None:
    body = sse(*(json.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]})
                 for piece in ("I should check.</th", "ink>The answer.")))  # fmt: skip
    events = parse(tmp_path, body, "--api", "openai-chat", "--think-opened")
    kinds = [(e["type"], e["text"]) for e in events if e["type"] in ("think", "text")]
    assert kinds == [("think", "I should check."), ("text", "The answer.")]
    body = sse(json.dumps({"choices": [{"index": 0, "delta": {"content": "Use <think>x</think> tags."}}]}))
    events = parse(tmp_path, body, "--api", "openai-chat", "--think-tags")
    assert [e["type"] for e in events if e["type"] in ("think", "text")] == ["text"]  # after text: literal text


def test_lines_without_newlines_cost_linear_time() -> None:
    """20,000 chunks of one endless line: each byte is looked at a bounded number of times (a quadratic parser
    rescans the whole pending line per chunk). Measured as work, not wall time: the parsers' buffers."""
    sse_parser, ollama = SSEParser(), OllamaAdapter()
    for _ in range(20_000):
        sse_parser.feed(b"x" * 50)
        ollama.feed(b"x" * 50)
    assert len(sse_parser._partial) == 20_000 and len(ollama._partial) == 20_000  # kept as pieces, not re-joined
    assert sse_parser.feed(b"\n") == []  # a line of 1,000,000 x's: a field named x, dispatched at a blank line
    [unreadable] = ollama.feed(b"\n")  # the same line is one NDJSON record that is not JSON: reported once
    assert type(unreadable).__name__ == "ErrorEvent"
    assert sse_parser._partial == [] and ollama._partial == []


def test_the_gateway_refuses_a_nested_body_and_passes_a_hostile_stream_through(
    server: tuple[str, Script],
    gateway_for: GatewayFor,
) -> None:
    upstream, script = server
    stream = sse(DEEP, '{"choices": [{"index": 0, "delta": {"content": "fine"}, "finish_reason": "stop"}]}')
    script.responses = [(200, {}, stream + b"data: [DONE]\n\n")]
    base_url, _ = gateway_for(upstream)
    passed = httpx.post(f"{base_url}/chat/completions", json={"model": "m", "stream": True,
                                                               "messages": [{"role": "user", "content": "hi"}]},
                        timeout=30)  # fmt: skip
    assert passed.status_code == 200 and passed.content == stream + b"data: [DONE]\n\n"  # the client's stream is whole
    local_url, _ = gateway_for("local")
    refused = httpx.post(f"{local_url}/chat/completions", content=DEEP.encode(), timeout=30,
                         headers={"content-type": "application/json"})  # fmt: skip
    assert refused.status_code == 400 and refused.json()["error"]["type"] == "invalid_request_error"


GATEWAY_MAX_BODY = 8 << 20  # the documented default bound of a gateway request body


def _raw_request(base_url: str, headers: dict[str, str]) -> http.client.HTTPConnection:
    """A POST to the gateway with its headers sent: the body is the caller's to send (or not)."""
    host, port = base_url.removeprefix("http://").split("/")[0].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.putrequest("POST", "/v1/chat/completions")
    for name, value in {"content-type": "application/json", **headers}.items():
        connection.putheader(name, value)
    connection.endheaders()
    return connection


def _peak_memory_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024


def test_the_gateway_refuses_a_declared_oversized_body_before_reading_any_of_it(
    server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    """Issue 31: any page the operator's browser opens can POST to the loopback gateway; a body was read whole, with
    no bound. A Content-Length over the bound is a 413 at once — the body is never sent, and the gateway answers."""
    upstream, script = server
    base_url, _ = gateway_for(upstream)
    connection = _raw_request(base_url, {"content-length": str(100 << 20)})
    response = connection.getresponse()  # nothing of the 100 MiB is sent: the answer cannot wait for it
    status, body = response.status, response.read()
    connection.close()
    assert status == 413
    assert json.loads(body)["error"]["message"] == (f"the request body declares 104857600 bytes; the gateway accepts "
                                                    f"at most {GATEWAY_MAX_BODY} bytes")  # fmt: skip
    assert script.requests == []  # nothing was forwarded


def test_the_gateway_stops_reading_an_unbounded_chunked_body_at_its_bound_and_stays_small(
    server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    """Issue 31: a body without a Content-Length (chunked) was appended to with ``+=`` — quadratic copying, 519 MB
    for 128 MiB. Sent in 1 MiB chunks, up to 64 MiB: the 413 comes once the bound is passed, while the client is still
    sending, the gateway's peak memory stays far below the body, and the next request is served."""
    upstream, script = server
    base_url, _ = gateway_for(upstream)
    pid = gateway_for.processes[-1].pid  # type: ignore[attr-defined]
    connection = _raw_request(base_url, {"transfer-encoding": "chunked"})
    chunk = b"%x\r\n" % (1 << 20) + b" " * (1 << 20) + b"\r\n"
    sent = 0
    try:
        while sent < 64 << 20 and not select.select([connection.sock], [], [], 0.05)[0]:
            connection.send(chunk)
            sent += 1 << 20
    except OSError:
        pass  # the gateway closed the connection: it stopped reading
    response = connection.getresponse()
    status, body = response.status, response.read()
    connection.close()
    assert status == 413 and f"at most {GATEWAY_MAX_BODY} bytes" in json.loads(body)["error"]["message"]
    assert sent < 64 << 20  # answered while the client was still sending
    assert _peak_memory_mib(pid) < 160  # an interpreter, uvicorn and at most 8 MiB of body; not 64 MiB copied around
    script.responses = [(200, {}, sse('{"choices": [{"index": 0, "delta": {"content": "ok"}}]}') + b"data: [DONE]\n\n")]
    answered = httpx.post(f"{base_url}/chat/completions", json={"model": "m", "stream": True, "messages": []},
                          timeout=30)  # fmt: skip
    assert answered.status_code == 200 and b"ok" in answered.content
    assert script.requests and len(script.requests) == 1  # only the well-formed request reached the upstream


def test_a_body_just_under_the_gateway_bound_is_forwarded_whole(
    server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    upstream, script = server
    script.responses = [(200, {}, sse('{"choices": [{"index": 0, "delta": {"content": "ok"}}]}') + b"data: [DONE]\n\n")]
    base_url, _ = gateway_for(upstream)
    long_message = "x" * (GATEWAY_MAX_BODY - 1000)
    request = {"model": "m", "stream": True, "messages": [{"role": "user", "content": long_message}]}
    answered = httpx.post(f"{base_url}/chat/completions", json=request, timeout=60)
    assert answered.status_code == 200
    assert script.requests[0]["body"]["messages"][0]["content"] == long_message


def test_a_deeply_nested_request_body_is_a_400_with_a_reason_not_a_500(
    server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    """Issue 31: the gateway read the model name of every body it forwards with Python's recursive parser: ``[[[[…``
    100,000 deep was a RecursionError and a 500. Now a 400 that names the depth, nothing forwarded, no traceback."""
    upstream, script = server
    base_url, _ = gateway_for(upstream)
    nested = ('{"model": "m", "messages": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()
    refused = httpx.post(f"{base_url}/chat/completions", content=nested, timeout=30,
                         headers={"content-type": "application/json"})  # fmt: skip
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == ("the request body is JSON nested 100001 levels deep; at most 64 "
                                                  "are accepted")  # fmt: skip
    assert script.requests == []
    process = gateway_for.processes[-1]  # type: ignore[attr-defined]
    process.terminate()
    assert b"Traceback" not in process.communicate(timeout=10)[1]


def test_upstream_credentials_never_reach_metrics_logs_or_error_bodies(
    tmp_path: Path, server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    """``--upstream http://user:password@host``: the credentials are used for the hop and shown nowhere — not in a
    metrics label, not in the gateway's 502 when the upstream is gone, not on its standard error."""
    upstream, script = server
    script.responses = [(200, {}, sse(json.dumps(chat_event(content="hi"))))]
    secret = "s3cret-pw"
    with_password = upstream.replace("http://", f"http://alice:{secret}@") + f"?token={secret}"
    (tmp_path / "open.toml").write_text("[metrics]\nopen = true\n")
    base_url, _ = gateway_for(with_password, "--config", "open.toml")
    answered = httpx.post(base_url + "/chat/completions", json={"model": "m", "messages": [{"role": "user",
                          "content": "hi"}], "stream": True}, timeout=30)  # fmt: skip
    assert answered.status_code == 200
    dead = f"http://alice:{secret}@127.0.0.1:{free_port()}"
    dead_url, _ = gateway_for(dead, "--config", "open.toml")
    failed = httpx.post(dead_url + "/chat/completions", json={"model": "m", "messages": [{"role": "user",
                        "content": "hi"}], "stream": True}, timeout=30)  # fmt: skip
    assert failed.status_code == 502 and "***@127.0.0.1" in failed.text
    metrics = httpx.get(base_url.removesuffix("/v1") + "/metrics", timeout=10).text
    metrics += httpx.get(dead_url.removesuffix("/v1") + "/metrics", timeout=10).text
    assert "groundstate_model_calls_total" in metrics and "***@" in metrics
    for process in gateway_for.processes:  # type: ignore[attr-defined]
        process.terminate()
        _, stderr = process.communicate(timeout=10)
        assert secret not in stderr.decode()
    assert secret not in failed.text and secret not in metrics


def test_the_gate_passes_nothing_of_a_whole_reply_but_what_it_judged(
    server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    """``gateway --gate`` with a non-streamed reply carrying native ``tool_calls``, a second choice and a refusal
    field beside a valid envelope: the client gets one choice whose content is the released surface, and nothing
    else of what the upstream sent."""
    upstream, script = server
    good = json.dumps({"control_packet": {"intent_classification": {"category": "/query", "verb": "/research",
                                                                    "confidence": 0.9}},
                       "surface_response": "The answer is 42."})  # fmt: skip
    smuggled = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "usage": {"prompt_tokens": 3,
                "completion_tokens": 5, "total_tokens": 8},
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": good, "refusal": "unjudged text",
                    "tool_calls": [{"id": "t1", "type": "function", "function": {
                        "name": "delete_everything", "arguments": "{}"}}]}},
                    {"index": 1, "finish_reason": "stop", "message": {"role": "assistant",
                                                                      "content": "an unjudged second answer"}}]}
    script.responses = [(200, {"content-type": "application/json"}, json.dumps(smuggled).encode())]
    base_url, _ = gateway_for(upstream, "--gate")
    reply = httpx.post(base_url + "/chat/completions", json={"model": "m", "messages": [{"role": "user",
                       "content": "hi"}]}, timeout=30).json()  # fmt: skip
    assert reply["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "The answer is 42."},
                                 "finish_reason": "stop"}]  # fmt: skip
    text = json.dumps(reply)
    assert "delete_everything" not in text and "unjudged" not in text and reply["id"].startswith("chatcmpl-gated-")
    assert reply["usage"]["total_tokens"] == 8
