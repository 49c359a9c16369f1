"""Tool calls from the local model: when a chat request to the local gateway carries ``tools``, the model's output
is constrained (llama.cpp grammar from a JSON schema) to either an answer (``{"content": ...}``) or calls of the
offered functions with arguments that fit each function's parameters — so what comes back as ``tool_calls`` was
produced under the schema, never scraped from free text. ``tool_choice`` narrows it: ``none`` (text only),
``required`` or one named function (calls only)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from .chat_request import ChatRequest

MAX_CALLS = 4  # calls in one answer (1 unless parallel_tool_calls)


def answer_schema(request: ChatRequest) -> dict[str, Any]:
    """The JSON schema the model's answer is constrained to."""
    calls = [{"type": "object", "properties": {"name": {"const": t.function.name}, "arguments": t.function.parameters},
              "required": ["name", "arguments"], "additionalProperties": False}
             for t in request.callable_tools]  # fmt: skip
    most = MAX_CALLS if request.parallel_tool_calls else 1
    calling = {"type": "object", "additionalProperties": False, "required": ["tool_calls"],
               "properties": {"tool_calls": {"type": "array", "minItems": 1, "maxItems": most,
                                             "items": {"anyOf": calls}}}}  # fmt: skip
    if request.must_call:
        return calling
    answering = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"],
                 "additionalProperties": False}  # fmt: skip
    return {"anyOf": [answering, calling]}


def instructions(request: ChatRequest) -> dict[str, str]:
    """A system turn telling the model which functions it may call and how its answer is shaped."""
    listed = [{"name": t.function.name, "description": t.function.description or "",
               "parameters": t.function.parameters} for t in request.callable_tools]  # fmt: skip
    how = ('Answer with JSON: {"tool_calls": [{"name": ..., "arguments": {...}}]} to call functions'
           if request.must_call else
           'Answer with JSON: {"content": "your answer"}, or {"tool_calls": [{"name": ..., "arguments": {...}}]} to '
           'call functions')  # fmt: skip
    return {"role": "system", "content": f"You can call these functions: {json.dumps(listed)}. {how}."}


def read_answer(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(content, OpenAI-shaped tool_calls) of a constrained answer; text that is not one (cut by the token budget)
    comes back as content, unchanged."""
    try:
        value = json.loads(text)
    except ValueError:
        return text, []
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        calls = [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                  "function": {"name": str(c.get("name")), "arguments": json.dumps(c.get("arguments", {}))}}
                 for c in value["tool_calls"] if isinstance(c, dict)]  # fmt: skip
        return None, calls
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"], []
    return text, []
