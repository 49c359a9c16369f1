"""MCP servers as upstreams — fronted by the guard, used by workflow agents (``tools: [mcp:git/git_status]``):
started and spoken to directly (stdio, ``mcp_stdio.py``) or reached with the official SDK's client (streamable
HTTP), initialised, and their tools listed
under namespaced names (``SERVER__TOOL``) so two servers' tools never collide and the policy always knows which
server a call goes to. The SDK is imported when a server is connected, not with this package."""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

import anyio

from ..config import McpServerConfig
from ..errors import ConfigurationError
from .mcp_stdio import stdio_session

SEPARATOR = "__"
MAX_TOOL_NAME = 64  # characters of a function name OpenAI's and Anthropic's APIs accept
# characters of an upstream's own tool name: MCP's tool names are at most 128 (SEP-986); a longer one is left out,
# and said so, rather than recorded cut short or failing every call to it (PostgreSQL's ledger column held 200)
MAX_UPSTREAM_TOOL_NAME = 128


class McpServerError(ConfigurationError):
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
    failed: dict[str, str] = field(default_factory=dict)  # servers left out (``connect(partial=True)``), and why
    left_out: list[str] = field(default_factory=list)  # tools of the servers that started, left out, and why
    _routes: dict[str, tuple[str, str]] | None = field(default=None, repr=False)  # exposed name -> (server, tool)

    def exposed(self) -> list[Any]:
        """Every upstream tool under its namespaced name, schema and annotations unchanged."""
        return [tool.model_copy(update={"name": exposed_name(server, tool.name)})
                for server, tools in self.tools.items() for tool in tools]  # fmt: skip

    def route(self, name: str) -> tuple[str, str] | None:
        """(server, tool) of a namespaced tool name, or None when no upstream lists it."""
        if self._routes is None or len(self._routes) != sum(len(tools) for tools in self.tools.values()):
            self._routes = {exposed_name(server, tool.name): (server, tool.name)
                            for server, tools in self.tools.items() for tool in tools}  # fmt: skip
        return self._routes.get(name)

    def shortened(self) -> list[tuple[str, str]]:
        """(full name, the name it is listed under) of every tool whose namespaced name was too long."""
        return [(f"{server}{SEPARATOR}{tool.name}", exposed_name(server, tool.name))
                for server, tools in self.tools.items() for tool in tools
                if exposed_name(server, tool.name) != f"{server}{SEPARATOR}{tool.name}"]  # fmt: skip


def exposed_name(server: str, tool: str) -> str:
    """``SERVER__TOOL``, or — past ``MAX_TOOL_NAME`` characters, which OpenAI's and Anthropic's APIs refuse in a
    function name — its first characters and a digest of the whole, so every name stays distinct and stable."""
    full = f"{server}{SEPARATOR}{tool}"
    if len(full) <= MAX_TOOL_NAME:
        return full
    digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{full[: MAX_TOOL_NAME - 9]}_{digest}"


async def connect(
    servers: dict[str, McpServerConfig],
    stack: contextlib.AsyncExitStack,
    start_timeout: float = 30.0,
    *,
    partial: bool = False,
    logs: Path | None = None,
) -> Upstreams:
    """Start or reach every configured server at once (closed with ``stack``), each given ``start_timeout`` seconds
    to initialise and list its tools. A server that fails or does not answer in time is stopped and named: with
    ``partial`` it is left out (``Upstreams.failed`` says why) unless every server failed, else — and then — an
    McpServerError names each one. ``logs``: a directory where each stdio server's stderr goes (``mcp-NAME.log``),
    kept out of the caller's own stderr (an MCP client shows the guard's stderr as its log); None: inherited."""
    upstreams = Upstreams()
    if not servers:
        return upstreams
    stop = anyio.Event()
    group = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(stop.set)  # runs before the group is left: each server's task closes its own client
    slots = {name: _Slot() for name in servers}
    for name, server in servers.items():
        errlog = None
        if logs is not None and server.command is not None:
            logs.mkdir(parents=True, exist_ok=True)
            errlog = stack.enter_context((logs / f"mcp-{name}.log").open("a", encoding="utf-8"))
        group.start_soon(_keep, name, server, slots[name], stop, errlog)
    with anyio.move_on_after(start_timeout):
        for slot in slots.values():
            await slot.ready.wait()
    for name, slot in slots.items():
        if not slot.ready.is_set():
            slot.scope.cancel()  # its process is stopped as its client unwinds
            upstreams.failed[name] = f"mcp.servers.{name}: did not start within {start_timeout:g} s " \
                                     "(mcp.start_timeout_sec): no answer to initialize or tools/list"  # fmt: skip
        elif slot.error is not None:
            upstreams.failed[name] = slot.error
        else:
            upstreams.sessions[name] = slot.session
            upstreams.tools[name] = [tool for tool in slot.tools if len(tool.name) <= MAX_UPSTREAM_TOOL_NAME]
            upstreams.left_out += [f"mcp.servers.{name}: the tool {tool.name[:60]!r}… (its name is {len(tool.name)} "
                                   f"characters; MCP's are at most {MAX_UPSTREAM_TOOL_NAME})"
                                   for tool in slot.tools if len(tool.name) > MAX_UPSTREAM_TOOL_NAME]  # fmt: skip
    if upstreams.failed and (not partial or not upstreams.sessions):
        raise McpServerError("; ".join(upstreams.failed.values()))
    return upstreams


@dataclass
class _Slot:
    """One server being started: its task's cancel scope, whether it is ready (or failed), and what it gave."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ready: anyio.Event = field(default_factory=anyio.Event)
    session: Any = None
    tools: list[Any] = field(default_factory=list)
    error: str | None = None


async def _keep(name: str, server: McpServerConfig, slot: _Slot, stop: anyio.Event, errlog: TextIO | None) -> None:
    """Start one server, hand over its session, and hold its client open until ``stop`` (in its own task: the SDK's
    clients are task groups that must be left by the task that entered them). Its failure is its slot's, never
    the other servers' or the guard's."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    with slot.scope:
        try:
            async with contextlib.AsyncExitStack() as own:
                session: Any
                if server.command is not None:  # spoken to directly (mcp_stdio.py): the SDK's session cost a third
                    session = await own.enter_async_context(stdio_session(name, server.command, server.env, errlog))
                else:
                    assert server.url is not None
                    streams = await own.enter_async_context(streamable_http_client(server.url))
                    session = await own.enter_async_context(ClientSession(streams[0], streams[1]))
                await session.initialize()
                slot.session, slot.tools = session, list((await session.list_tools()).tools)
                slot.ready.set()
                await stop.wait()
        except Exception as exc:  # the SDK raises many kinds; each is this server's failure
            if not slot.ready.is_set():
                leaf = first_error(exc)
                slot.error = f"mcp.servers.{name}: cannot start or reach the server: {type(leaf).__name__}: {leaf}"
                slot.ready.set()


def first_error(error: BaseException) -> BaseException:
    """The first real error inside the SDK's (nested) task-group exception groups: the one worth naming."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
