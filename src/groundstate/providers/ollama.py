"""Ollama's native API (``/api/chat``, ``/api/generate``): newline-delimited JSON, not SSE.

Each line is a JSON object: ``message.content`` / ``message.thinking`` (``response`` / ``thinking`` for
``/api/generate``), tool calls that arrive whole (``message.tool_calls[].function`` with parsed arguments),
and a last line with ``done: true``, ``done_reason`` and token counts. An ``{"error": "..."}`` line is an
in-band error. A last line without its newline, or no ``done: true``, is a truncated stream.
"""

from __future__ import annotations

import json
from typing import Any

from .adapter import StreamAdapter, as_items
from .errors import classify
from .normalized import ErrorEvent, Event, Finish, TextDelta, ThinkDelta, Truncated, Usage
from .sse import ServerSentEvent

_FINISH = {"stop": "stop", "length": "length", "load": "other", "unload": "other"}


class OllamaAdapter(StreamAdapter):
    """Ollama's chat stream (NDJSON: a JSON object per line, the last with ``"done": true``), normalized."""

    end_marker = 'a line with "done": true'
    line_framed = True

    def __init__(self, provider: str = "ollama") -> None:
        super().__init__(provider)
        self._partial: list[bytes] = []  # pieces of a line not yet ended, joined once when it ends

    @property
    def _pending(self) -> bytes:
        return b"".join(self._partial)

    def feed(self, data: bytes) -> list[Event]:
        """The events of the lines ``data`` ends; a line not yet ended waits for the bytes that end it."""
        if self.overlong:
            return []
        if (refused := self._refused(data)) is not None:
            return refused
        out: list[Event] = []
        if b"\n" not in data:
            if data:
                self._partial.append(data)  # no line ended: nothing is re-joined or re-scanned
            return out
        lines = data.split(b"\n")
        lines[0] = b"".join([*self._partial, lines[0]])
        tail = lines.pop()
        self._partial = [tail] if tail else []
        for line in lines:
            self._line(line, out)
        return self._whole(out)

    def close(self) -> list[Event]:
        """The end of the stream: what was held back, and Truncated if no line said it was done."""
        out: list[Event] = []
        if self.overlong:
            return out  # refused already, with its error
        if self.done:
            return self._whole(out, final=True)
        self._finish_calls(out, complete=False)
        if self._pending.strip():
            text = self._pending.decode("utf-8", "replace")
            out.append(Truncated(f"the stream ended inside a line: {text[:200]!r}"))
        else:
            out.append(Truncated(f"the stream ended without {self.end_marker}"))
        self._partial = []
        return self._whole(out, final=True)

    def _line(self, line: bytes, out: list[Event]) -> None:
        if self.done or not line.strip():
            return
        self._contained(ServerSentEvent(line.decode("utf-8", "replace")), out)

    def _event(self, event: ServerSentEvent, out: list[Event]) -> None:
        payload = self._payload(event, out)
        if payload is None:
            return
        if "error" in payload:
            out.append(ErrorEvent(classify(self.provider, None, payload)))
            return
        message: dict[str, Any] = payload["message"] if isinstance(payload.get("message"), dict) else {}
        thinking = message.get("thinking", payload.get("thinking"))
        if isinstance(thinking, str) and thinking:
            out.append(ThinkDelta(thinking))
        content = message.get("content", payload.get("response"))
        if isinstance(content, str) and content:
            out.append(TextDelta(content))
        for tool in as_items(message.get("tool_calls")):
            given = tool if isinstance(tool, dict) else {"name": tool}  # a name alone, or no call's shape at all
            function = given["function"] if isinstance(given.get("function"), dict) else given  # or no wrapper
            key = -1 - self._call_count
            call = self._start_call(key, given.get("id"), function.get("name", tool), out)
            arguments = function.get("arguments")
            if arguments is not None:
                self._add_arguments(call, arguments if isinstance(arguments, str) else json.dumps(arguments), out)
            self._finish_call(key, out, complete=True)
        if payload.get("done") is True:
            reason = payload.get("done_reason", "stop")
            out.append(Finish(_FINISH.get(str(reason).lower(), "other"), reason))
            if "eval_count" in payload or "prompt_eval_count" in payload:
                out.append(Usage(payload.get("prompt_eval_count"), payload.get("eval_count")))
            self.done = True
