"""OpenAI Chat Completions streams (also vLLM, llama.cpp server, Ollama /v1, DeepSeek, OpenRouter, Azure).

Sans-IO: ``feed(bytes)`` returns events, ``close()`` ends the stream. Tool calls are assembled by index,
with the server bugs seen in the wild handled explicitly: every parallel call sent with ``index: 0`` (a
new ``id`` on index 0 starts a new call), ``index`` missing (a fragment with an ``id`` starts a call, one
without continues the last), a call complete in one chunk, and ``""`` arguments for a no-argument call.
With ``n`` > 1 every event carries the ``choices[].index`` it came from; calls are kept apart per choice.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .adapter import StreamAdapter, as_items, text_or_none
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
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_call": "tool_calls",  # spellings some servers use (and a hostile one may): a tool call all the same
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}


def _text_only_chunk() -> re.Pattern[bytes]:
    """A ``data:`` line holding a chunk that can only carry text: every key spelled out (an escaped key is not
    matched), no ``error``, ``usage`` null, ``object`` the chunk's own, and choices whose delta has only content,
    role or reasoning text and whose ``finish_reason`` is null. JSON's whitespace is limited to spaces and tabs (a
    line break would end the SSE line), integers to 18 digits (Python refuses to read very long ones) and exponents
    to 2 (``1e999`` is no number the parser accepts: such a chunk is an error to count, never text to skip)."""
    ws = rb"[ \t]*+"  # possessive: whitespace is never given back, so no input makes the match backtrack far
    plain = rb'[^"\\\x00-\x1f]*+'  # a run of characters that need no escape, taken at once (no per-character loop)
    string = b'"' + plain + rb'(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})' + plain + b')*+"'
    integer = rb"-?(?:0|[1-9][0-9]{0,17})"
    number = integer + rb"(?:\.[0-9]{1,20})?(?:[eE][+-]?[0-9]{1,2})?"
    scalar = b"(?:" + b"|".join((string, number, b"null", b"true", b"false")) + b")"

    def obj(*members: bytes) -> bytes:
        member = b"(?:" + b"|".join(members) + b")"
        more = ws + b"," + ws + member
        return rb"\{" + ws + b"(?:" + member + b"(?:" + more + b")*)?" + ws + rb"\}"

    def key(name: bytes, value: bytes) -> bytes:
        return b'"' + name + b'"' + ws + b":" + ws + value

    text = b"(?:" + string + b"|null)"
    delta = obj(key(b"content", text), key(b"role", string), key(b"refusal", b"null"),
                key(b"reasoning_content", text), key(b"reasoning", text))  # fmt: skip
    choice = obj(key(b"index", integer), key(b"delta", delta), key(b"finish_reason", b"null"),
                 key(b"logprobs", b"null"))  # fmt: skip
    choices = rb"\[" + ws + b"(?:" + choice + b"(?:" + ws + b"," + ws + choice + b")*)?" + ws + rb"\]"
    chunk = obj(key(b"id", scalar), key(b"object", b'"chat\\.completion\\.chunk"'), key(b"created", scalar),
                key(b"model", scalar), key(b"system_fingerprint", scalar), key(b"service_tier", scalar),
                key(b"obfuscation", scalar), key(b"usage", b"null"), key(b"choices", choices))  # fmt: skip
    return re.compile(b"data:" + ws + chunk + ws)


class OpenAIChatAdapter(StreamAdapter):
    """OpenAI's chat-completions stream (SSE ``data:`` chunks ending with ``[DONE]``) and the servers that speak it
    (vLLM, llama.cpp's server, OpenRouter, LiteLLM), normalized."""

    end_marker = "data: [DONE]"
    text_only = _text_only_chunk()

    def __init__(self, provider: str = "openai") -> None:
        super().__init__(provider)
        # calls are keyed by (choice, the server's index or a synthetic one); the last call per choice
        self._last_call: dict[int, tuple[int, int]] = {}

    def _event(self, event: ServerSentEvent, out: list[Event]) -> None:
        if "error" in event.fields and not event.data:  # llama.cpp's non-standard "error:" field
            out.append(ErrorEvent(classify(self.provider, None, event.fields["error"])))
            return
        if event.data.strip() == "[DONE]":
            self._finish_calls(out, complete=True)
            self._last_call.clear()
            self.done = True
            return
        chunk = self._payload(event, out)
        if chunk is None:
            return
        if "error" in chunk or chunk.get("object") == "error":
            out.append(ErrorEvent(classify(self.provider, None, chunk)))  # OpenRouter adds finish_reason "error"
        for choice in as_items(chunk.get("choices")):  # one object sent without its list is still the choice
            if isinstance(choice, dict):
                self._choice(choice, out)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            out.append(Usage(usage.get("prompt_tokens"), usage.get("completion_tokens")))

    def _choice(self, choice: dict[str, Any], out: list[Event]) -> None:
        number = choice["index"] if isinstance(choice.get("index"), int) else 0
        delta = choice.get("delta") or {}
        if isinstance(delta, dict):
            seen: list[str] = []  # some servers send the same reasoning under both names: it is one delta
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str) and delta[key] and delta[key] not in seen:
                    seen.append(delta[key])
                    out.append(ThinkDelta(delta[key], number))
            if isinstance(delta.get("content"), str) and delta["content"]:
                out.append(TextDelta(delta["content"], number))
            if isinstance(delta.get("refusal"), str) and delta["refusal"]:
                out.append(Refusal(delta["refusal"], number))
            message = choice.get("message")  # a whole message where a delta belongs: its calls are calls too
            calls = [*as_items(delta.get("tool_calls")),
                     *(as_items(message.get("tool_calls")) if isinstance(message, dict) else [])]  # fmt: skip
            for fragment in calls:
                if isinstance(fragment, dict):
                    self._tool_fragment(number, fragment, out)
                else:  # a name alone, or no call's shape at all: still the native call it is, reported whole
                    opened = (number, -1 - self._call_count)
                    self._start_call(opened, None, fragment, out, number)
                    self._finish_call(opened, out, complete=True)
            legacy = delta.get("function_call")  # the legacy form: one call, no index, no id
            if isinstance(legacy, dict):
                self._tool_fragment(number, {"index": 0, "function": legacy}, out)
            elif legacy is not None and legacy != "":  # a name alone, or no call's shape: the call it still is
                self._tool_fragment(number, {"index": 0, "function": {"name": legacy}}, out)
        reason = choice.get("finish_reason")
        if reason is not None:
            self._finish_calls(out, complete=True, choice=number)
            self._last_call.pop(number, None)
            out.append(Finish(_FINISH.get(str(reason).lower(), "other"), reason, number))

    def _tool_fragment(self, number: int, fragment: dict[str, Any], out: list[Event]) -> None:
        function: dict[str, Any] = fragment["function"] if isinstance(fragment.get("function"), dict) else {}
        call_id, name = fragment.get("id"), function.get("name")
        arguments = function.get("arguments")
        index = fragment.get("index")
        last = self._last_call.get(number)
        if isinstance(index, int):
            key = (number, index)
        else:  # no index: an id starts a new call, otherwise the fragment continues the last call
            key = (number, -1 - self._call_count) if call_id or last is None else last
        call = self._calls.get(key)
        if call is not None and call_id and call.id and call_id != call.id:
            call = None  # a second call sent on the same index: starting it ends the first (_start_call)
        if call is None:
            call = self._start_call(key, call_id, name, out, number)
        else:
            call.id = call.id or text_or_none(call_id)
            call.name = call.name or text_or_none(name)
        self._last_call[number] = key
        if isinstance(arguments, str) and arguments:
            self._add_arguments(call, arguments, out)
        elif isinstance(arguments, dict):  # some servers send the arguments already parsed
            self._add_arguments(call, json.dumps(arguments), out)

