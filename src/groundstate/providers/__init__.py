"""groundstate.providers — upstream LLM streams turned into typed events, never guessed.

from groundstate.providers import StreamClient
async for event in StreamClient("https://api.openai.com/v1", api="openai-chat").stream(body): ...

The public face: the table of APIs, the streaming client with its retry policy, the normalised events every adapter
emits, the error planes, the SSE parser, text conventions (``<think>`` tags, text tool calls), the local llama.cpp
model, the SIGIL bridge, the gateway's typed chat request, and MCP servers as upstreams (``connect``; and
``stopped_with_us``: stopped with the process that started them, even on SIGTERM).

The heavy parts — the HTTP client (httpx), the gateway, the chat request's model (pydantic), MCP, the metrics
(prometheus_client) — are imported on first use (``__getattr__``), so a command that only reads recorded streams
starts without them (bench/cli).
"""

import importlib
from typing import TYPE_CHECKING, Any

from .adapter import MAX_NAME_CHARS, StreamAdapter
from .anthropic import AnthropicAdapter
from .apis import APIS, ProviderAPI, UnknownAPI, provider_api
from .bridge import HoldRefused, SigilBridge, checked_hold
from .conventions import TextConventions
from .errors import CUT_OFF, ErrorRecord, classify, header_map
from .gated import GATED_APIS, GateFactory, OutputGate
from .in_band import WholeEvents, event_end, in_band_error
from .lines import MAX_LINE, READ_SIZE, LineTooLong, pipe_lines
from .local import GeneratedToken, LocalModel, LocalModelError, default_model_path
from .mcp_stdio import UpstreamClosed, UpstreamRefused
from .normalized import (
    FINISH_REASONS,
    MAX_TOKEN_COUNT,
    ErrorEvent,
    Event,
    Finish,
    Refusal,
    TextDelta,
    ThinkDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Truncated,
    Usage,
    merge_deltas,
    to_json,
)
from .ollama import OllamaAdapter
from .openai_chat import OpenAIChatAdapter
from .openai_responses import OpenAIResponsesAdapter
from .openai_wire import ReplyCutOff, ReplyRefused, RequestTooLarge, UnknownPath, problem_body
from .server_processes import SHUTDOWN_GRACE_SEC, adopting_orphans, stopped_with_us, unreadable_by_peers
from .sse import ServerSentEvent, SSEParser, SSETruncated
from .text_tools import TextToolCalls, UnknownStyle
from .think_tags import ThinkTags
from .tool_hints import ToolHints, tool_hints

_LAZY = {
    "ChatRequestError": ("chat_request", "ChatRequestError"),
    "parse_chat_request": ("chat_request", "parse_chat_request"),
    "RetryPolicy": ("client", "RetryPolicy"), "StreamClient": ("client", "StreamClient"),
    "CoalescingHttpToolsProtocol": ("coalesced", "CoalescingHttpToolsProtocol"),
    "Gateway": ("gateway", "Gateway"), "serve_gateway": ("gateway", "serve"),
    "MAX_PUBLISH_HOLD_SEC": ("gateway", "MAX_PUBLISH_HOLD_SEC"),
    "without_credentials": ("gateway", "without_credentials"),
    "SEPARATOR": ("mcp_servers", "SEPARATOR"), "ToolCaller": ("mcp_servers", "ToolCaller"),
    "McpServerError": ("mcp_servers", "McpServerError"), "Upstreams": ("mcp_servers", "Upstreams"),
    "connect": ("mcp_servers", "connect"), "first_error": ("mcp_servers", "first_error"),
    "ProviderMetrics": ("metrics", "ProviderMetrics"), "provider_of": ("metrics", "provider_of"),
    "ReplyTooLarge": ("upstream", "ReplyTooLarge"), "Upstream": ("upstream", "Upstream"),
    "UpstreamFailure": ("upstream", "UpstreamFailure"),
}  # fmt: skip

if TYPE_CHECKING:
    from .chat_request import ChatRequestError, parse_chat_request
    from .client import RetryPolicy, StreamClient
    from .coalesced import CoalescingHttpToolsProtocol
    from .gateway import MAX_PUBLISH_HOLD_SEC, Gateway, without_credentials
    from .gateway import serve as serve_gateway
    from .mcp_servers import SEPARATOR, McpServerError, ToolCaller, Upstreams, connect, first_error
    from .metrics import ProviderMetrics, provider_of
    from .upstream import ReplyTooLarge, Upstream, UpstreamFailure


def __getattr__(name: str) -> Any:
    """A heavy part of the face, imported now (and kept, so this runs once per name)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(f".{module}", __name__), attribute)
    globals()[name] = value
    return value


__all__ = [
    "APIS",
    "CUT_OFF",
    "FINISH_REASONS",
    "GATED_APIS",
    "MAX_LINE",
    "MAX_NAME_CHARS",
    "MAX_PUBLISH_HOLD_SEC",
    "MAX_TOKEN_COUNT",
    "READ_SIZE",
    "SEPARATOR",
    "SHUTDOWN_GRACE_SEC",
    "AnthropicAdapter",
    "ChatRequestError",
    "CoalescingHttpToolsProtocol",
    "ErrorEvent",
    "ErrorRecord",
    "Event",
    "Finish",
    "GateFactory",
    "Gateway",
    "GeneratedToken",
    "HoldRefused",
    "LineTooLong",
    "LocalModel",
    "LocalModelError",
    "McpServerError",
    "OllamaAdapter",
    "OpenAIChatAdapter",
    "OpenAIResponsesAdapter",
    "OutputGate",
    "ProviderAPI",
    "ProviderMetrics",
    "Refusal",
    "ReplyCutOff",
    "ReplyRefused",
    "ReplyTooLarge",
    "RequestTooLarge",
    "RetryPolicy",
    "SSEParser",
    "SSETruncated",
    "ServerSentEvent",
    "SigilBridge",
    "StreamAdapter",
    "StreamClient",
    "TextConventions",
    "TextDelta",
    "TextToolCalls",
    "ThinkDelta",
    "ThinkTags",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolCaller",
    "ToolHints",
    "Truncated",
    "UnknownAPI",
    "UnknownPath",
    "UnknownStyle",
    "Upstream",
    "UpstreamClosed",
    "UpstreamFailure",
    "UpstreamRefused",
    "Upstreams",
    "Usage",
    "WholeEvents",
    "adopting_orphans",
    "checked_hold",
    "classify",
    "connect",
    "default_model_path",
    "event_end",
    "first_error",
    "header_map",
    "in_band_error",
    "merge_deltas",
    "parse_chat_request",
    "pipe_lines",
    "problem_body",
    "provider_api",
    "provider_of",
    "serve_gateway",
    "stopped_with_us",
    "to_json",
    "tool_hints",
    "unreadable_by_peers",
    "without_credentials",
]
