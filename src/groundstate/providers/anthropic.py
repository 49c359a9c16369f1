"""Anthropic Messages streams: ``message_start``, content blocks with their deltas, ``message_delta``,
``message_stop``; ``ping`` anywhere; unknown event and delta types tolerated.

A ``tool_use`` block's ``input_json_delta`` fragments are parsed at ``content_block_stop``; with
``stop_reason: max_tokens`` a block may never stop, and is then reported incomplete (never executed).
"""

from __future__ import annotations

import json
from typing import Any

from .adapter import StreamAdapter
from .errors import classify
from .normalized import (
    ErrorEvent,
    Event,
    Finish,
    Refusal,
    TextDelta,
    ThinkDelta,
    Usage,
)
from .sse import ServerSentEvent

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "pause_turn": "pause",
    "refusal": "refusal",
}


class AnthropicAdapter(StreamAdapter):
    """Anthropic's Messages API stream (typed SSE events over content blocks: text, thinking, tool_use), normalized;
    its end marker is ``message_stop``."""

    end_marker = "message_stop"
    incomplete_call = "the tool call was cut off before its block ended"

    def __init__(self, provider: str = "anthropic") -> None:
        super().__init__(provider)  # open tool calls are keyed by their content block's index
        self._input_tokens: int | None = None

    def _event(self, event: ServerSentEvent, out: list[Event]) -> None:
        payload = self._payload(event, out)
        if payload is None:
            return
        kind = payload.get("type", event.event)
        if kind == "error":
            out.append(ErrorEvent(classify(self.provider, None, payload)))
        elif kind == "message_start":
            usage = (payload.get("message") or {}).get("usage") or {}
            self._input_tokens = usage.get("input_tokens")
        elif kind == "content_block_start":
            self._block_start(payload, out)
        elif kind == "content_block_delta":
            self._delta(payload, out)
        elif kind == "content_block_stop":
            index = payload.get("index")
            if isinstance(index, int) and index in self._calls:
                self._finish_call(index, out, complete=True)
        elif kind == "message_delta":
            self._finish_calls(out, complete=False)  # a tool_use block that never stopped (max_tokens)
            delta = payload.get("delta") or {}
            reason = delta.get("stop_reason")
            if reason is not None:
                out.append(Finish(_FINISH.get(str(reason).lower(), "other"), reason))
            usage = payload.get("usage") or {}
            if "output_tokens" in usage:
                out.append(Usage(usage.get("input_tokens", self._input_tokens), usage["output_tokens"]))
        elif kind == "message_stop":
            self._finish_calls(out, complete=False)
            self.done = True
        # ping and unknown types: nothing to do

    def _block_start(self, payload: dict[str, Any], out: list[Event]) -> None:
        given = payload.get("content_block")
        block: dict[str, Any] = given if isinstance(given, dict) else {}
        index = payload.get("index")
        kind = block.get("type")
        if kind in _TOOL_BLOCKS:
            key = index if isinstance(index, int) else ("unindexed", self._call_count)
            call = self._start_call(key, block.get("id"), block.get("name"), out)
            if isinstance(block.get("input"), dict) and block["input"]:  # a block that arrives with its input
                self._add_arguments(call, json.dumps(block["input"]), out)
            if not isinstance(index, int):  # no delta can name it: it is whole as it came (it was not reported)
                self._finish_call(key, out, complete=True)
        elif kind == "text" and _text(block.get("text")):  # a field that is not text is no text (never a crash)
            out.append(TextDelta(block["text"]))
        elif kind == "thinking" and _text(block.get("thinking")):
            out.append(ThinkDelta(block["thinking"]))
        # redacted_thinking arrives whole and encrypted: there is no text to show

    def _delta(self, payload: dict[str, Any], out: list[Event]) -> None:
        given = payload.get("delta")
        delta: dict[str, Any] = given if isinstance(given, dict) else {}
        kind = delta.get("type")
        if kind == "text_delta" and _text(delta.get("text")):
            out.append(TextDelta(delta["text"]))
        elif kind == "thinking_delta" and _text(delta.get("thinking")):
            out.append(ThinkDelta(delta["thinking"]))
        elif kind == "input_json_delta":
            index = payload.get("index")
            call = self._calls.get(index) if isinstance(index, int) else None
            fragment = delta.get("partial_json")
            if call is not None and isinstance(fragment, str) and fragment:
                self._add_arguments(call, fragment, out)
        elif kind == "refusal_delta" and _text(delta.get("refusal")):
            out.append(Refusal(delta["refusal"]))
        # signature_delta, citations_delta and unknown deltas carry no text for the user


_TOOL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")  # a call of the client's tools, of Anthropic's own
# (web search, code execution) and of a remote MCP server: each reported as a native call (only the first was)


def _text(value: Any) -> bool:
    """Whether a field the provider sent is text to show: a non-empty string (a number, a list or an object in its
    place is not — the fuzzer sends them; the field is left out, never a crash)."""
    return isinstance(value, str) and bool(value)
