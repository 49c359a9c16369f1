"""The body of a chat-completions request to the local gateway, validated before anything reads it.

A client is as untrusted as a model: the body is bounded JSON (``safejson``) checked by a strict pydantic model —
messages with a role and text content, bounded token counts and temperature, a boolean ``stream``. Anything else —
a malformed value, or a parameter the local model does not honour (``n`` above 1, ``tools``, ``logprobs``, …) — is
a ``ChatRequestError`` with a message for the 400 response, never silently ignored and never an exception inside
the server.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import safejson
from ..errors import InputError

MAX_BODY_BYTES = 4 * 1024 * 1024


class ChatRequestError(InputError, ValueError):
    """The request body is not a usable chat-completions request; the message says what is wrong."""


class Message(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str = Field(max_length=1_000_000)


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
        return ChatRequest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(e) for e in exc.errors()[:5])
        raise ChatRequestError(f"expected a chat-completions request: {problems}") from None


def _problem(error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "body"
    if error["type"] == "extra_forbidden":
        return f"{where}: the local gateway does not support this parameter"
    if where == "n":
        return "n: the local gateway generates one choice (n = 1)"
    return f"{where}: {error['msg']}"
