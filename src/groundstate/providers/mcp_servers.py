"""MCP servers as upstreams — fronted by the guard, used by workflow agents (``tools: [mcp:git/git_status]``):
started (stdio) or reached (streamable HTTP) with the official SDK's client, initialised, and their tools listed
under namespaced names (``SERVER__TOOL``) so two servers' tools never collide and the policy always knows which
server a call goes to. The SDK is imported when a server is connected, not with this package."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import McpServerConfig
from ..errors import ConfigurationError

SEPARATOR = "__"


class UpstreamError(ConfigurationError):
    """An upstream server could not be started, reached or initialised; the message names it."""


class ToolCaller(Protocol):
    """What the guard forwards a call to: an upstream's client session, or the local Python tools."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """The tool's result (an MCP CallToolResult)."""
        ...


@dataclass
class Upstreams:
    """The connected servers: their sessions and tools, by server name."""

    sessions: dict[str, ToolCaller] = field(default_factory=dict)
    tools: dict[str, list[Any]] = field(default_factory=dict)

    def exposed(self) -> list[Any]:
        """Every upstream tool under its namespaced name, schema and annotations unchanged."""
        return [tool.model_copy(update={"name": f"{server}{SEPARATOR}{tool.name}"})
                for server, tools in self.tools.items() for tool in tools]  # fmt: skip

    def route(self, name: str) -> tuple[str, str] | None:
        """(server, tool) of a namespaced tool name, or None when no upstream lists it."""
        server, separator, tool = name.partition(SEPARATOR)
        if not separator or server not in self.tools or tool not in {t.name for t in self.tools[server]}:
            return None
        return server, tool


async def connect(servers: dict[str, McpServerConfig], stack: contextlib.AsyncExitStack) -> Upstreams:
    """Start or reach every configured server (closed with ``stack``); UpstreamError names one that fails."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    upstreams = Upstreams()
    for name, server in servers.items():
        try:
            if server.command is not None:
                program, *arguments = server.command
                params = StdioServerParameters(command=program, args=arguments, env=server.env or None)
                streams = await stack.enter_async_context(stdio_client(params))
            else:
                assert server.url is not None
                streams = await stack.enter_async_context(streamable_http_client(server.url))
            read, write = streams[0], streams[1]
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            listed = await session.list_tools()
        except Exception as exc:  # the SDK raises many kinds; each is this server's failure to start
            leaf = first_error(exc)
            problem = f"{type(leaf).__name__}: {leaf}"
            raise UpstreamError(f"mcp.servers.{name}: cannot start or reach the server: {problem}") from None
        upstreams.sessions[name], upstreams.tools[name] = session, list(listed.tools)
    return upstreams


def first_error(error: BaseException) -> BaseException:
    """The first real error inside the SDK's (nested) task-group exception groups: the one worth naming."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
