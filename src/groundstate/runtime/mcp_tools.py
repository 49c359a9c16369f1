"""MCP tools for workflow agents (``tools: [mcp:git/git_status]``): the configured servers (``[mcp.servers]``) are
connected once per process, on a loop of their own in a background thread, and each call a kernel routes to the
``mcp_tool`` executor is sent there and waited for — after the same decision, journal and guards as every tool.

An agent sees an MCP tool under the name ``SERVER__TOOL`` (lowercase, other characters as ``_``), the name the
guard lists it under too; its arguments are a JSON object (the tool's input schema is in the agent's prompt).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from concurrent.futures import Future
from typing import Any

from ..config import McpServerConfig
from ..errors import ConfigurationError, ExecutorError
from ..kernel import Action, Context, Outcome
from ..providers import McpServerError, Upstreams, connect, tool_hints
from .workflow import agent_tool_name, is_mcp_tool


class McpToolsError(ConfigurationError):
    """A workflow names an MCP server the configuration does not have, or a tool its server does not list."""


class McpTools:
    """The connected servers, on their own loop: tools by agent name, and the executor that calls them."""

    def __init__(self, servers: dict[str, McpServerConfig], start_timeout: float = 30.0) -> None:
        self.servers, self.start_timeout = servers, start_timeout
        self.tools: dict[str, tuple[str, Any]] = {}  # agent name -> (server, the MCP tool as listed)
        self._upstreams: Upstreams | None = None
        self._loop = asyncio.new_event_loop()
        self._ready: Future[Upstreams] = Future()
        self._closing: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="groundstate-mcp-tools", daemon=True)
        self._thread.start()
        upstreams = self._ready.result(timeout=120)  # raises the connection's error here
        for server, listed in upstreams.tools.items():
            for tool in listed:
                self.tools[agent_tool_name(f"mcp:{server}/{tool.name}")] = (server, tool)
        self._upstreams = upstreams

    def check(self, refs: list[str]) -> None:
        """McpToolsError naming every workflow entry no connected server lists."""
        missing = [ref for ref in refs if is_mcp_tool(ref) and agent_tool_name(ref) not in self.tools]
        if missing:
            listed = ", ".join(sorted(f"mcp:{s}/{t.name}" for s, t in self.tools.values()))
            raise McpToolsError(f"no configured MCP server lists {', '.join(missing)} (listed: {listed or 'none'})")

    def listed(self) -> list[tuple[str, str, str, bool, bool]]:
        """Every connected tool: (the agent's name for it, server, tool, whether it is read-only, whether it may
        destroy data) — its annotations read with MCP's defaults, as the guard reads them."""
        return [(name, server, tool.name, hints.read_only, hints.destructive)
                for name, (server, tool) in self.tools.items() for hints in [tool_hints(tool)]]  # fmt: skip

    def describe(self, name: str) -> str:
        """The tool's description and input schema, for the agent's prompt."""
        server, tool = self.tools[name]
        first = (tool.description or f"the MCP tool {tool.name} of {server}").strip().splitlines()[0]
        return f"{first} (MCP: {server}/{tool.name}) argument: a JSON object of {json.dumps(tool.input_schema)}"

    def execute(self, action: Action, context: Context) -> Outcome:
        """The ``mcp_tool`` executor: send the call to its server and wait (at most the shard's time limit)."""
        if action.type not in self.tools or self._upstreams is None:
            raise ExecutorError(f"no connected MCP server lists {action.type!r}")
        server, tool = self.tools[action.type]
        text = action.payload if action.payload.strip().startswith("{") else action.target
        try:
            arguments = json.loads(text or "{}")
        except ValueError as exc:
            raise ExecutorError(f"{action.type} takes its arguments as a JSON object: {exc}") from None
        if not isinstance(arguments, dict):
            raise ExecutorError(f"{action.type} takes its arguments as a JSON object")
        session = self._upstreams.sessions[server]
        future = asyncio.run_coroutine_threadsafe(session.call_tool(tool.name, arguments), self._loop)
        try:
            result = future.result(timeout=context.timeout_s)
        except TimeoutError:
            future.cancel()
            return Outcome(False, f"{server}/{tool.name} did not answer within {context.timeout_s:g} s")
        except Exception as exc:  # the server failed or broke its protocol: this call's failure
            return Outcome(False, f"{server}/{tool.name} failed: {type(exc).__name__}: {exc}")
        texts = [getattr(block, "text", "") or json.dumps(block.model_dump(mode="json")) for block in result.content]
        return Outcome(not result.is_error, context.bounded("\n".join(texts)))

    def close(self) -> None:
        """Disconnect the servers and stop the loop."""
        if self._closing is not None:
            self._loop.call_soon_threadsafe(self._closing.set)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._closing = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    upstreams = await connect(self.servers, stack, self.start_timeout)
                except McpServerError as exc:  # named before the SDK's own teardown errors can replace it
                    self._ready.set_exception(exc)
                    raise
                self._ready.set_result(upstreams)
                await self._closing.wait()
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
