"""OpenAI Responses API streams: ``event: <type>`` with ``data: {"type": <type>, ...}``, no ``[DONE]``.

Function calls are output items ``{type: "function_call", id: "fc_...", call_id: "call_...", name}`` whose
arguments arrive as ``response.function_call_arguments.delta`` events; the ToolCall carries the
``call_id``, which tool results must reference. The stream ends with ``response.completed``,
``response.incomplete`` or ``response.failed``; an ``error`` event comes flat or nested.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .adapter import StreamAdapter
from .errors import classify
from .normalized import ErrorEvent, Event, Finish, Refusal, TextDelta, ThinkDelta, Usage
from .sse import ServerSentEvent

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


_DELTAS: dict[str, Callable[[str], Event]] = {
    "response.output_text.delta": TextDelta,
    "response.reasoning_summary_text.delta": ThinkDelta,
    "response.reasoning_text.delta": ThinkDelta,
    "response.refusal.delta": Refusal,
}


class OpenAIResponsesAdapter(StreamAdapter):
    """The OpenAI Responses API's typed SSE events, normalized."""

    end_marker = "response.completed, response.incomplete or response.failed"

    def __init__(self, provider: str = "openai") -> None:
        super().__init__(provider)  # open function calls are keyed by their output_index
        self._called = False

    def _event(self, event: ServerSentEvent, out: list[Event]) -> None:
        payload = self._payload(event, out)
        if payload is None:
            return
        kind = payload.get("type", event.event)
        delta = _DELTAS.get(kind) if isinstance(kind, str) else None
        if delta is not None:
            if isinstance(payload.get("delta"), str) and payload["delta"]:  # not text: no text (never a crash)
                out.append(delta(payload["delta"]))
        elif kind == "response.output_item.added":
            self._item_added(payload, out)
        elif kind == "response.function_call_arguments.delta":
            index = payload.get("output_index")
            open_call = self._calls.get(index) if isinstance(index, int) else None
            if open_call is not None and isinstance(payload.get("delta"), str) and payload["delta"]:
                self._add_arguments(open_call, payload["delta"], out)
        elif kind in ("response.function_call_arguments.done", "response.output_item.done"):
            self._item_done(payload, out)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            response = payload.get("response")
            self._terminal(kind, response if isinstance(response, dict) else {}, out)
        elif kind == "error":
            out.append(ErrorEvent(classify(self.provider, None, payload)))

    def _item_added(self, payload: dict[str, Any], out: list[Event]) -> None:
        """A new output item: a function call opens (its arguments may come with it)."""
        raw_item = payload.get("item")
        item: dict[str, Any] = raw_item if isinstance(raw_item, dict) else {}
        index = payload.get("output_index")
        if _is_call(item):
            key = index if isinstance(index, int) else ("unindexed", self._call_count)
            call = self._start_call(key, item.get("call_id") or item.get("id"), item.get("name", item["type"]), out)
            if isinstance(item.get("arguments"), str) and item["arguments"]:
                self._add_arguments(call, item["arguments"], out)
            self._called = True
            if not isinstance(index, int):  # no later event can name it: it is whole as it came (it went unreported)
                self._finish_call(key, out, complete=True)

    def _item_done(self, payload: dict[str, Any], out: list[Event]) -> None:
        """An open call ends; arguments given only whole, at the end, are taken from here."""
        index = payload.get("output_index")
        item = payload.get("item")
        if isinstance(item, dict) and _is_call(item) and not (isinstance(index, int) and index in self._calls):
            self._item_added(payload, out)  # a call seen only when done: reported all the same
        if isinstance(index, int) and index in self._calls:
            whole = payload.get("arguments")
            if not self._calls[index].fragments and isinstance(whole, str) and whole:
                self._calls[index].fragments.append(whole)
            self._finish_call(index, out, complete=True)

    def _terminal(self, kind: str, response: dict[str, Any], out: list[Event]) -> None:
        self._finish_calls(out, complete=kind == "response.completed")
        if kind == "response.failed":
            error = response.get("error")
            out.append(ErrorEvent(classify(self.provider, None, {"error": error if isinstance(error, dict) else {}})))
            out.append(Finish("error", "failed"))
        elif kind == "response.incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            out.append(Finish(_INCOMPLETE.get(str(reason), "other"), reason))
        else:
            out.append(Finish("tool_calls" if self._called else "stop", response.get("status", "completed")))
        usage = response.get("usage")
        if isinstance(usage, dict):
            out.append(Usage(usage.get("input_tokens"), usage.get("output_tokens")))
        self.done = True


def _is_call(item: dict[str, Any]) -> bool:
    """Whether an output item is a call of a tool: a function's, or any other kind the API names ``…_call`` (a
    custom tool's, an MCP server's, a local shell's, a hosted tool's) — every one is reported as a native call
    (only ``function_call`` was, and a ``local_shell_call`` went unseen: found by an attack)."""
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith("_call")
