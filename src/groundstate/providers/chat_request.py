"""The body of a chat-completions request to the local gateway, validated before anything reads it.

A client is as untrusted as a model: the body is bounded JSON (``safejson``) checked by a strict pydantic model —
messages with a role and text content, bounded token counts and temperature, a boolean ``stream``. Anything else
is a ``ChatRequestError`` with a message for the 400 response, never an exception inside the server.
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


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    messages: list[Message] = Field(min_length=1, max_length=1000)
    max_tokens: int | None = Field(None, ge=1, le=32_768)
    max_completion_tokens: int | None = Field(None, ge=1, le=32_768)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    stream: bool = False
    response_format: dict[str, Any] | None = None

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
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5])
        raise ChatRequestError(f"expected a chat-completions request: {problems}") from None
