"""The body of a chat-completions request to the local gateway, validated before anything reads it.

A client is as untrusted as a model: the body is bounded JSON (``safejson``) checked by a strict pydantic model —
messages with a role and text content, bounded token counts and temperature, a boolean ``stream``, function
``tools`` with their JSON schemas and a ``tool_choice``. Anything else — a malformed value, or a parameter the local
model does not honour (``n`` above 1, ``logprobs``, …) — is a ``ChatRequestError`` with a message for the 400
response, never silently ignored and never an exception inside the server.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .. import safejson
from ..errors import InputError

MAX_BODY_BYTES = 4 * 1024 * 1024


class ChatRequestError(InputError, ValueError):
    """The request body is not a usable chat-completions request; the message says what is wrong."""


class Message(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | None = Field(None, max_length=1_000_000)  # None: an assistant turn that only called tools
    tool_calls: list[dict[str, Any]] | None = Field(None, max_length=64)
    tool_call_id: str | None = Field(None, max_length=200)

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts(cls, content: Any) -> Any:
        """Content given as a list of parts (what the Agents SDK and LangChain send for tool results) is its text
        parts joined; any other kind of part (an image, audio, a file) is refused by name — the local model reads
        text only."""
        if not isinstance(content, list):
            return content
        texts = []
        for number, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind != "text" or not isinstance(part.get("text"), str):
                shown = repr(kind) if isinstance(kind, str) else "a part without a type"
                raise ValueError(f"part {number} is {shown[:60]}: the local model reads text parts only")
            texts.append(part["text"])
        return "".join(texts)

    def as_prompt(self) -> dict[str, str]:
        """The turn as the local model's chat template takes it: tool calls and results written out as text."""
        if self.role == "tool":
            return {"role": "user", "content": f"Result of tool call {self.tool_call_id or ''}: {self.content or ''}"}
        if self.tool_calls:
            calls = [{"name": c.get("function", {}).get("name"), "arguments": c.get("function", {}).get("arguments")}
                     for c in self.tool_calls]  # fmt: skip
            return {"role": "assistant", "content": json.dumps({"tool_calls": calls})}
        return {"role": "developer" if self.role == "developer" else self.role, "content": self.content or ""}


class Function(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = Field(None, max_length=10_000)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


class Tool(BaseModel):
    """A function the model may call (OpenAI's ``tools`` entry)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    type: Literal["function"]
    function: Function


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    include_usage: bool = False


class ChatRequest(BaseModel):
    """The parameters the local model honours; any other is refused by name, never silently ignored."""

    model_config = ConfigDict(extra="forbid", strict=True)

    messages: list[Message] = Field(min_length=1, max_length=1000)
    model: str | None = Field(None, max_length=200)  # informational: the gateway serves one model
    max_tokens: int | None = Field(None, ge=1, le=32_768)
    max_completion_tokens: int | None = Field(None, ge=1, le=32_768)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    stream: bool = False
    stream_options: StreamOptions | None = None
    response_format: dict[str, Any] | None = None
    n: Literal[1] = 1  # one choice: the local model generates one answer at a time
    user: str | None = Field(None, max_length=200)
    tools: list[Tool] | None = Field(None, max_length=128)
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None

    @property
    def callable_tools(self) -> list[Tool]:
        """The tools the model may call in this answer (``tool_choice`` narrows them; ``none``: none)."""
        tools = self.tools or []
        if self.tool_choice == "none":
            return []
        if isinstance(self.tool_choice, dict):
            named = (self.tool_choice.get("function") or {}).get("name")
            return [t for t in tools if t.function.name == named]
        return tools

    @property
    def must_call(self) -> bool:
        """The answer must be tool calls (``required``, or one function named)."""
        return bool(self.callable_tools) and (self.tool_choice == "required" or isinstance(self.tool_choice, dict))

    @property
    def include_usage(self) -> bool:
        """Whether a streamed answer ends with a usage chunk (``stream_options.include_usage``)."""
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def token_budget(self) -> int:
        return self.max_tokens or self.max_completion_tokens or 256

    @property
    def json_schema(self) -> dict[str, Any] | None:
        spec = (self.response_format or {}).get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return schema if isinstance(schema, dict) else None


def parse_chat_request(body: bytes) -> ChatRequest:
    """An OpenAI-style chat request body, checked (size, depth, shape) before anything reads it."""
    if len(body) > MAX_BODY_BYTES:
        raise ChatRequestError(f"the body has {len(body)} bytes; at most {MAX_BODY_BYTES} are accepted")
    try:
        data = safejson.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ChatRequestError(f"the body is not usable JSON: {exc}") from None
    try:
        request = ChatRequest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(e) for e in exc.errors()[:5])
        raise ChatRequestError(f"expected a chat-completions request: {problems}") from None
    if isinstance(request.tool_choice, dict) and not request.callable_tools:
        raise ChatRequestError("tool_choice: names a function that is not among the request's tools")
    if request.tools and request.response_format is not None:
        raise ChatRequestError("response_format: the local gateway constrains the answer to tool calls or to a "
                               "schema, not both")  # fmt: skip
    return request


def _problem(error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "body"
    if error["type"] == "extra_forbidden":
        return f"{where}: the local gateway does not support this parameter"
    if where == "n":
        return "n: the local gateway generates one choice (n = 1)"
    return f"{where}: {error['msg']}"
