"""groundstate.providers — upstream LLM streams turned into typed events, never guessed.

from groundstate.providers import StreamClient
async for event in StreamClient("https://api.openai.com/v1", api="openai-chat").stream(body): ...

The public face: the table of APIs, the streaming client with its retry policy, the normalised events every adapter
emits, the error planes, the SSE parser, text conventions (``<think>`` tags, text tool calls), the local llama.cpp
model, the SIGIL bridge, the gateway's typed chat request, and MCP servers as upstreams (``connect``).
"""

from .adapter import StreamAdapter
from .apis import APIS, ProviderAPI, UnknownAPI, provider_api
from .bridge import SigilBridge
from .chat_request import ChatRequestError, parse_chat_request
from .client import RetryPolicy, StreamClient
from .conventions import TextConventions
from .errors import CUT_OFF, ErrorRecord, classify, header_map
from .gated import GATED_APIS, GateFactory, OutputGate
from .gateway import Gateway
from .gateway import serve as serve_gateway
from .local import GeneratedToken, LocalModel, LocalModelError, default_model_path
from .mcp_servers import SEPARATOR, ToolCaller, UpstreamError, Upstreams, connect, first_error
from .metrics import ProviderMetrics, provider_of
from .normalized import (
    FINISH_REASONS,
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
from .sse import ServerSentEvent, SSEParser, SSETruncated
from .text_tools import UnknownStyle

__all__ = [
    "APIS",
    "CUT_OFF",
    "FINISH_REASONS",
    "GATED_APIS",
    "SEPARATOR",
    "ChatRequestError",
    "ErrorEvent",
    "ErrorRecord",
    "Event",
    "Finish",
    "GateFactory",
    "Gateway",
    "GeneratedToken",
    "LocalModel",
    "LocalModelError",
    "OutputGate",
    "ProviderAPI",
    "ProviderMetrics",
    "Refusal",
    "RetryPolicy",
    "SSEParser",
    "SSETruncated",
    "ServerSentEvent",
    "SigilBridge",
    "StreamAdapter",
    "StreamClient",
    "TextConventions",
    "TextDelta",
    "ThinkDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolCaller",
    "Truncated",
    "UnknownAPI",
    "UnknownStyle",
    "UpstreamError",
    "Upstreams",
    "Usage",
    "classify",
    "connect",
    "default_model_path",
    "first_error",
    "header_map",
    "merge_deltas",
    "parse_chat_request",
    "provider_api",
    "provider_of",
    "serve_gateway",
    "to_json",
]
