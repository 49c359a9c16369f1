"""Anthropic Messages streams: ``message_start``, content blocks with their deltas, ``message_delta``,
``message_stop``; ``ping`` anywhere; unknown event and delta types tolerated.

A ``tool_use`` block's ``input_json_delta`` fragments are parsed at ``content_block_stop``; with
``stop_reason: max_tokens`` a block may never stop, and is then reported incomplete (never executed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .adapter import StreamAdapter
from .errors import classify
from .events import (
    ErrorEvent,
    Event,
    Finish,
    Refusal,
    TextDelta,
    ThinkDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    parse_arguments,
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


@dataclass
class _ToolUse:
    number: int
    id: str | None
    name: str | None
    json: list[str] = field(default_factory=list)


class AnthropicAdapter(StreamAdapter):
    end_marker = "message_stop"

    def __init__(self, provider: str = "anthropic") -> None:
        super().__init__(provider)
        self._blocks: dict[int, _ToolUse] = {}
        self._count = 0
        self._input_tokens: int | None = None

    def _end_open(self, out: list[Event]) -> None:
        self._end_blocks(out)

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
            if index in self._blocks:
                self._finish(index, out, complete=True)
        elif kind == "message_delta":
            self._end_blocks(out)  # a tool_use block that never stopped (max_tokens) is incomplete
            delta = payload.get("delta") or {}
            reason = delta.get("stop_reason")
            if reason is not None:
                out.append(Finish(_FINISH.get(str(reason), "other"), reason))
            usage = payload.get("usage") or {}
            if "output_tokens" in usage:
                out.append(Usage(usage.get("input_tokens", self._input_tokens), usage["output_tokens"]))
        elif kind == "message_stop":
            self._end_blocks(out)
            self.done = True
        # ping and unknown types: nothing to do

    def _block_start(self, payload: dict[str, Any], out: list[Event]) -> None:
        block = payload.get("content_block") or {}
        index = payload.get("index")
        kind = block.get("type")
        if kind == "tool_use" and isinstance(index, int):
            tool = self._blocks[index] = _ToolUse(self._count, block.get("id"), block.get("name"))
            self._count += 1
            out.append(ToolCallStart(tool.number, tool.id, tool.name))
            if isinstance(block.get("input"), dict) and block["input"]:  # a block that arrives with its input
                tool.json.append(json.dumps(block["input"]))
        elif kind == "text" and block.get("text"):
            out.append(TextDelta(block["text"]))
        elif kind == "thinking" and block.get("thinking"):
            out.append(ThinkDelta(block["thinking"]))
        # redacted_thinking arrives whole and encrypted: there is no text to show

    def _delta(self, payload: dict[str, Any], out: list[Event]) -> None:
        delta = payload.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            out.append(TextDelta(delta["text"]))
        elif kind == "thinking_delta" and delta.get("thinking"):
            out.append(ThinkDelta(delta["thinking"]))
        elif kind == "input_json_delta":
            tool = self._blocks.get(payload.get("index"))  # type: ignore[arg-type]
            fragment = delta.get("partial_json")
            if tool is not None and isinstance(fragment, str) and fragment:
                tool.json.append(fragment)
                out.append(ToolCallDelta(tool.number, fragment))
        elif kind == "refusal_delta" and delta.get("refusal"):
            out.append(Refusal(delta["refusal"]))
        # signature_delta, citations_delta and unknown deltas carry no text for the user

    def _finish(self, index: int, out: list[Event], complete: bool) -> None:
        tool = self._blocks.pop(index)
        raw = "".join(tool.json)
        if complete:
            arguments, error = parse_arguments(raw)
        else:
            arguments, error = None, "the tool call was cut off before its block ended"
        out.append(ToolCall(tool.number, tool.id, tool.name, arguments, error, raw))

    def _end_blocks(self, out: list[Event]) -> None:
        for index in sorted(self._blocks, key=lambda i: self._blocks[i].number):
            self._finish(index, out, complete=False)
