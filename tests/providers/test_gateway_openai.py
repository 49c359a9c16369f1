"""The gateway as a good OpenAI citizen, checked with the official `openai` SDK: the models list, usage (whole and
streamed), tools passed through to the upstream and back as tool_calls, unsupported parameters refused by name,
every error an OpenAI-shaped body the SDK raises as its typed exception, and a startup line saying what it serves."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.trusted import trusted

from ..runtime.conftest import envelope, sse
from .conftest import GatewayFor, Script, free_port

TOOLS_TRANSCRIPT = (Path(__file__).parent / "transcripts" / "openai-chat" / "parallel-split.sse").read_bytes()
CITY = {"type": "object", "properties": {"city": {"type": "string"}}}
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "Weather by city",
                                             "parameters": CITY}}]  # fmt: skip
HI = [{"role": "user", "content": "Say hi."}]


def test_the_local_model_lists_itself_and_reports_usage(gateway_for: GatewayFor) -> None:
    base_url, _ = gateway_for("local")
    client: Any = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    [model] = client.models.list().data
    assert model.id.startswith("SmolLM2") and model.object == "model"
    reply = client.chat.completions.create(model=model.id, messages=HI, max_tokens=8)
    assert reply.usage is not None and reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    chunks = list(client.chat.completions.create(model=model.id, messages=HI, max_tokens=8, stream=True,
                                                 stream_options={"include_usage": True}))  # fmt: skip
    assert chunks[-1].choices == [] and chunks[-1].usage == reply.usage  # greedy: the same answer, the same count
    plain = list(client.chat.completions.create(model=model.id, messages=HI, max_tokens=8, stream=True))
    assert all(chunk.usage is None for chunk in plain)  # usage only when asked for


def test_the_local_model_calls_tools_under_their_schema(gateway_for: GatewayFor) -> None:
    """Local mode: with tools offered, the model's output is constrained to calls of them (or an answer); the SDK
    gets tool_calls whose arguments fit the function's parameters — whole and streamed."""
    base_url, _ = gateway_for("local")
    client: Any = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    ask = [{"role": "user", "content": "What is the weather in Paris? Call get_weather."}]
    reply = client.chat.completions.create(model="local", messages=ask, tools=WEATHER, tool_choice="required",
                                           max_tokens=48)  # fmt: skip
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
    arguments = json.loads(call.function.arguments)
    assert isinstance(arguments, dict) and set(arguments) <= {"city"}  # what the schema allows, nothing else
    if "city" in arguments:
        assert isinstance(arguments["city"], str)
    chunks = list(client.chat.completions.create(model="local", messages=ask, tools=WEATHER, tool_choice={
        "type": "function", "function": {"name": "get_weather"}}, max_tokens=48, stream=True))  # fmt: skip
    streamed = [c for chunk in chunks if chunk.choices for c in chunk.choices[0].delta.tool_calls or []]
    assert [c.function.name for c in streamed] == ["get_weather"]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    answer = [*ask, {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
              {"role": "tool", "tool_call_id": call.id, "content": "18 C and sunny"}]  # fmt: skip
    final = client.chat.completions.create(model="local", messages=answer, tools=WEATHER, tool_choice="none",
                                           max_tokens=16)  # fmt: skip
    assert final.choices[0].message.tool_calls is None and final.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"n": 2}, "n: the local gateway generates one choice"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "nope"}}, "tools": WEATHER},
            "tool_choice: names a function that is not among the request's tools",
        ),
        ({"logprobs": True}, "logprobs: the local gateway does not support this parameter"),
        ({"temperature": 5}, "temperature: Input should be less than or equal to 2"),
    ],
)
def test_unsupported_parameters_are_refused_by_name(
    gateway_for: GatewayFor, options: dict[str, object], message: str
) -> None:
    base_url, _ = gateway_for("local")
    client: Any = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError, match=message):
        client.chat.completions.create(model="local", messages=HI, **options)
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="local", input="x")


def test_tools_pass_through_to_the_upstream_and_back(server: tuple[str, Script], gateway_for: GatewayFor) -> None:
    upstream, script = server
    script.responses = [(200, {}, TOOLS_TRANSCRIPT)]
    base_url, _ = gateway_for(upstream)
    client: Any = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    stream = client.chat.completions.create(model="gpt-4o", messages=HI, tools=WEATHER, tool_choice="auto",
                                            stream=True)  # fmt: skip
    calls = [call for chunk in stream if chunk.choices for call in chunk.choices[0].delta.tool_calls or []]
    assert calls and any(call.function and call.function.name for call in calls)
    assert script.requests[0]["body"]["tools"] == WEATHER and script.requests[0]["body"]["tool_choice"] == "auto"


def test_an_unreachable_upstream_is_a_502_with_the_reason(gateway_for: GatewayFor) -> None:
    """The reason in asyncio's words: the gateway runs on asyncio's loop even though uvloop is installed here (the
    dev extra), which uvicorn would pick otherwise — it words a refused connection as "Connection refused"."""
    assert importlib.util.find_spec("uvloop") is not None  # else this could not tell the loops apart
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    base_url, _ = gateway_for(dead)
    client: Any = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="gpt-4o", messages=HI)
    assert info.value.status_code == 502
    assert f"the upstream at {dead} failed: cannot connect (Connect call failed" in str(info.value)
    assert httpx.get(base_url + "/models", timeout=10).json()["error"]["code"] == "upstream_unreachable"


def test_the_gateway_says_where_it_listens_and_what_it_serves(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "groundstate", "gateway", "--upstream", "https://api.example",
                                "--listen", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={"GROUNDSTATE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert line.strip() == (f"gateway: http://127.0.0.1:{port}/v1 — a proxy to https://api.example (openai-chat); "
                            "/metrics with an operator's token")  # fmt: skip


def test_the_packet_gate_passes_validated_surfaces_and_cuts_the_rest(
    server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    """``gateway --gate``: the client sees only the surface text of a reply whose control packet validated; a reply
    that is not an envelope, or whose packet breaks the schema, is cut with an error the SDK raises."""
    upstream, script = server
    good = json.dumps(envelope("The answer is 42. [STATUS: SUCCESS]"))
    broken = json.dumps({"control_packet": {"intent_classification": 5}, "surface_response": "The answer is 42."})
    whole = json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": good},
                                     "finish_reason": "stop"}]}).encode()  # fmt: skip
    script.responses = [
        (200, {}, sse(good)),
        (200, {}, sse("Sure! The answer is 42.")),
        (200, {}, sse(broken)),
        (200, {"content-type": "application/json"}, whole),
        (200, {"content-type": "application/json"}, whole.replace(b"control_packet", b"other")),
    ]
    base_url, _ = gateway_for(upstream, "--gate")
    client: Any = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    stream = client.chat.completions.create(model="gpt-4o", messages=HI, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == \
        "The answer is 42. [STATUS: SUCCESS]"  # fmt: skip
    for _ in range(2):  # prose instead of an envelope; a packet that does not validate
        with pytest.raises(openai.APIError, match="broke the control-packet protocol and was cut") as cut:
            for _chunk in client.chat.completions.create(model="gpt-4o", messages=HI, stream=True):
                assert "42" not in (_chunk.choices[0].delta.content or "") if _chunk.choices else True
        assert cut.value.body["code"] == "packet_gate"  # type: ignore[index]
    reply = client.chat.completions.create(model="gpt-4o", messages=HI)
    assert reply.choices[0].message.content == "The answer is 42. [STATUS: SUCCESS]"
    with pytest.raises(openai.InternalServerError, match="was cut: surface_response came before control_packet") as \
            refused:  # fmt: skip
        client.chat.completions.create(model="gpt-4o", messages=HI)
    assert refused.value.status_code == 502 and refused.value.body["code"] == "packet_gate"  # type: ignore[index]


def test_a_reply_cut_at_the_token_limit_reads_as_a_cut_off_through_the_gate(
    server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    """The upstream stopped at its output-token limit mid-envelope: the client is told that, in the words the
    runtime's pause uses for the same cut-off (providers.CUT_OFF), not that the protocol was broken."""
    from groundstate.providers import CUT_OFF

    from ..runtime.test_reason_ranking import CUT_OFF as PAUSE_REASON
    from ..runtime.test_reason_ranking import cut_short

    upstream, script = server
    half = cut_short(json.dumps(envelope("The market is worth " + "a lot " * 40)))
    whole = json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": '{"control_packet": {'},
                                     "finish_reason": "length"}]}).encode()  # fmt: skip
    script.responses = [(200, {}, half), (200, {"content-type": "application/json"}, whole)]
    base_url, _ = gateway_for(upstream, "--gate")
    client: Any = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(openai.APIError, match=f"the model's reply {CUT_OFF}") as cut:
        list(client.chat.completions.create(model="gpt-4o", messages=HI, stream=True))
    assert cut.value.body["code"] == "max_tokens"  # type: ignore[index]
    with pytest.raises(openai.InternalServerError, match=f"the model's reply {CUT_OFF}"):
        client.chat.completions.create(model="gpt-4o", messages=HI)
    assert CUT_OFF in PAUSE_REASON  # the runtime's pause for the same cut-off says the same


def test_the_packet_gate_is_refused_where_it_cannot_read_the_replies(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "groundstate", "gateway", "--upstream", "local", "--gate"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={"GROUNDSTATE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 2 and "--gate reads openai-chat replies from an upstream, not the local model" in \
        done.stderr  # fmt: skip


def test_reply_rules_cut_a_reply_before_any_of_its_surface(
    tmp_path: Path, server: tuple[str, Script], gateway_for: GatewayFor
) -> None:
    """``[gateway] rules``: the user's rules judge each validated packet before its surface is released."""
    upstream, script = server
    (tmp_path / "replies.mg").write_text(
        'reply_refused("mutations need a human") :- reply_intent(/mutation, _, _, _).\n'
        'reply_refused(R) :- reply_tool_request("delete_file", T), R = fn:string:concat("asks to delete ", T).\n'
    )
    (tmp_path / "groundstate.toml").write_text('[gateway]\nrules = ["replies.mg"]\n')
    trusted(tmp_path / "groundstate.toml", {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")})
    mutation = envelope("Deleted it all.")
    mutation["control_packet"]["intent_classification"]["category"] = "/mutation"
    deleting = envelope("Cleaning up.", [{"tool": "delete_file", "argument": "main.py"}])
    script.responses = [(200, {}, sse(json.dumps(e))) for e in (mutation, deleting, envelope("Fine."))]
    base_url, _ = gateway_for(upstream, "--gate")
    client: Any = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    for reason in ("mutations need a human", "asks to delete main.py"):
        seen: list[str] = []
        with pytest.raises(openai.APIError, match=f"the reply rules refused it: {reason}"):
            for chunk in client.chat.completions.create(model="m", messages=HI, stream=True):
                seen += [chunk.choices[0].delta.content or ""] if chunk.choices else []
        assert "".join(seen) == ""  # not a word of the refused reply
    allowed = client.chat.completions.create(model="m", messages=HI, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in allowed if c.choices) == "Fine."
    without = subprocess.run([sys.executable, "-m", "groundstate", "gateway", "--upstream", upstream],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path,
                             env={"GROUNDSTATE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert without.returncode == 2 and "[gateway] rules judge replies through the packet gate" in without.stderr
