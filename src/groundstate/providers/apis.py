"""The provider APIs groundstate speaks: one table that the client, the gateway, the CLI and the runtime read.

Adding an API means adding one row here (and its adapter); nothing else keeps its own list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from .adapter import StreamAdapter
from .anthropic import AnthropicAdapter
from .ollama import OllamaAdapter
from .openai_chat import OpenAIChatAdapter
from .openai_responses import OpenAIResponsesAdapter


@dataclass(frozen=True)
class ProviderAPI:
    """One wire API: where a streaming request goes, which adapter reads the stream, whose errors it returns."""

    name: str
    path: str  # appended to the base URL for a streaming request
    adapter: type[StreamAdapter]
    provider: str  # the error-plane vocabulary of providers.errors.classify
    request: Callable[[str, list[dict[str, str]], dict[str, Any], float | None], dict[str, Any]] | None = None
    """Builds a streaming chat request (model, messages, the envelope's JSON Schema); None: agents cannot use it."""


def _openai_chat(
    model: str, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float | None
) -> dict[str, Any]:
    response_format = {"type": "json_schema", "json_schema": {"name": "envelope", "schema": schema}}
    body = {"model": model, "messages": messages, "stream": True, "response_format": response_format}
    return body | ({"temperature": temperature} if temperature is not None else {})


def _anthropic(
    model: str, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float | None
) -> dict[str, Any]:
    system = "\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [m for m in messages if m["role"] != "system"]
    body = {"model": model, "messages": rest, "stream": True, "max_tokens": 2048, "system": system}
    return body | ({"temperature": temperature} if temperature is not None else {})


def _ollama(
    model: str, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
    return body | ({"options": {"temperature": temperature}} if temperature is not None else {})


APIS: dict[str, ProviderAPI] = {
    api.name: api
    for api in (
        ProviderAPI("openai-chat", "/chat/completions", OpenAIChatAdapter, "openai", _openai_chat),
        ProviderAPI("openai-responses", "/responses", OpenAIResponsesAdapter, "openai"),
        ProviderAPI("anthropic", "/messages", AnthropicAdapter, "anthropic", _anthropic),
        ProviderAPI("ollama", "/api/chat", OllamaAdapter, "ollama", _ollama),
    )
}


class UnknownAPI(ConfigurationError, ValueError):
    """An API name that is not in the table; the message lists the ones that are."""


def provider_api(name: str) -> ProviderAPI:
    """The table's row for ``name``, or UnknownAPI naming every API there is."""
    try:
        return APIS[name]
    except KeyError:
        raise UnknownAPI(f"unknown API {name!r}: use one of {', '.join(APIS)}") from None
