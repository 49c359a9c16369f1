"""A native tool call in a shape the adapters did not read — found by an attack on the run's record — is reported
as the native call it is: Anthropic's ``tool_use`` block without an integer index, or a second one opened on an index
still open; OpenAI's ``tool_calls`` as one object instead of a list, or a list item that is no object; Ollama's call
without its ``function`` wrapper. None of them was reported, so the run's protocol-violation rule never saw them (none
ever ran: tools run only from the control packet). Each is fed through the adapter as a provider streams it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from groundstate.providers import (
    AnthropicAdapter,
    OllamaAdapter,
    OpenAIChatAdapter,
    OpenAIResponsesAdapter,
    StreamAdapter,
    to_json,
)


def sse(*payloads: dict[str, Any]) -> bytes:
    return b"".join(b"event: x\ndata: " + json.dumps(p).encode() + b"\n\n" for p in payloads)


def calls(adapter: StreamAdapter, body: bytes) -> list[dict[str, Any]]:
    events = [to_json(e) for e in [*adapter.feed(body), *adapter.close()]]
    return [e for e in events if e["type"] == "tool_call"]


def anthropic(*blocks: dict[str, Any]) -> bytes:
    start = {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": [], "usage": {}}}
    stop: list[dict[str, Any]] = [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
                                  {"type": "message_stop"}]  # fmt: skip
    return sse(start, *blocks, *stop)


def test_an_anthropic_tool_use_without_an_index_is_reported_whole() -> None:
    block = {"type": "content_block_start", "content_block": {"type": "tool_use", "id": "t1", "name": "delete_file",
                                                               "input": {"path": "/etc/hosts"}}}  # fmt: skip
    [call] = calls(AnthropicAdapter(), anthropic(block))
    assert (call["name"], call["arguments"]) == ("delete_file", {"path": "/etc/hosts"})


def test_an_anthropic_index_reused_while_its_call_is_open_reports_both_calls() -> None:
    first = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "t1", "name": "delete_file", "input": {}}}  # fmt: skip
    second = {"type": "content_block_start", "index": 0,
              "content_block": {"type": "tool_use", "id": "t2", "name": "send_email", "input": {}}}  # fmt: skip
    stop = {"type": "content_block_stop", "index": 0}
    assert [c["name"] for c in calls(AnthropicAdapter(), anthropic(first, second, stop))] == ["delete_file",
                                                                                              "send_email"]


@pytest.mark.parametrize("kind", ["server_tool_use", "mcp_tool_use"])
def test_anthropic_calls_of_its_own_tools_and_of_mcp_servers_are_reported(kind: str) -> None:
    """Anthropic's server tools (web search, code execution) and remote MCP servers' tools run at the provider; a
    block of either is a native call all the same (neither was reported)."""
    block = {"type": "content_block_start", "index": 0,
             "content_block": {"type": kind, "id": "s1", "name": "web_search", "input": {"query": "x"}}}  # fmt: skip
    [call] = calls(AnthropicAdapter(), anthropic(block, {"type": "content_block_stop", "index": 0}))
    assert call["name"] == "web_search"


def openai(delta: dict[str, Any]) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    return sse(chunk, end) + b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    ("tool_calls", "named"),
    [
        ({"index": 0, "id": "c1", "function": {"name": "delete_file", "arguments": "{}"}}, "delete_file"),
        (["delete_file"], "delete_file"),
        ([42], "42"),
        ("delete_file", "delete_file"),
    ],
    ids=["one object, no list", "a list of a name", "a list of a number", "a name alone"],
)
def test_openai_tool_calls_in_another_shape_are_reported(tool_calls: Any, named: str) -> None:
    [call] = calls(OpenAIChatAdapter(), openai({"tool_calls": tool_calls}))
    assert call["name"] == named


@pytest.mark.parametrize(
    "chunk",
    [
        {"choices": [{"index": 0, "delta": {"function_call": "delete_file"}}]},
        {"choices": {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "delete_file"}}]}}},
        {"choices": [{"index": 0, "message": {"tool_calls": [{"id": "c1", "function": {"name": "delete_file"}}]}}]},
    ],
    ids=["legacy function_call as a name", "choices as one object", "a whole message's tool_calls"],
)
def test_openai_chunks_in_another_shape_still_report_their_call(chunk: dict[str, Any]) -> None:
    [call] = calls(OpenAIChatAdapter(), sse(chunk) + b"data: [DONE]\n\n")
    assert call["name"] == "delete_file"


@pytest.mark.parametrize(
    "events",
    [
        [{"type": "response.output_item.added", "output_index": 0,
          "item": {"type": "local_shell_call", "call_id": "c1", "action": {"command": ["rm", "-rf", "/"]}}}],
        [{"type": "response.output_item.added", "item": {"type": "custom_tool_call", "call_id": "c1",
                                                           "name": "local_shell_call"}}],
        [{"type": "response.output_item.done", "output_index": 0,
          "item": {"type": "function_call", "call_id": "c1", "name": "local_shell_call", "arguments": "{}"}}],
    ],
    ids=["a local shell call", "a custom tool's call without an index", "a call seen only when done"],
)
def test_responses_calls_of_any_kind_are_reported(events: list[dict[str, Any]]) -> None:
    """The Responses API's output items that call a tool — of any kind the API names ``…_call``, with or without an
    index, announced or seen only when done — are reported (only an announced, indexed ``function_call`` was)."""
    done = {"type": "response.completed", "response": {"status": "completed", "output": []}}
    [call] = calls(OpenAIResponsesAdapter(), sse(*events, done))
    assert call["name"] == "local_shell_call"


@pytest.mark.parametrize(
    ("tool_calls", "named"),
    [
        ([{"name": "delete_file", "arguments": {"path": "/etc/hosts"}}], "delete_file"),
        ({"function": {"name": "delete_file", "arguments": {}}}, "delete_file"),
        (["delete_file"], "delete_file"),
        ([{"id": "x"}], '{"id": "x"}'),
        (0, "0"),
    ],
    ids=["no function wrapper", "one object, no list", "a name alone", "no name anywhere", "a number"],
)
def test_ollama_tool_calls_in_another_shape_are_reported(tool_calls: Any, named: str) -> None:
    line = {"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": tool_calls}, "done": False}
    end = {"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"}
    [call] = calls(OllamaAdapter(), (json.dumps(line) + "\n" + json.dumps(end) + "\n").encode())
    assert call["name"] == named
