"""``groundstate mcp serve``: an MCP server in front of the configured upstream MCP servers. It lists their tools
(namespaced per server) and decides every ``tools/call`` with the policy before anything reaches an upstream:
permitted calls are forwarded and their result returned; denied ones are an MCP error carrying the reasons and the
derivation; calls that need an operator are held until one approves or ``mcp.approval_timeout_sec`` denies them.

What an attacker controls: the client's requests (names, arguments — a model chose them) and the upstreams' answers.
A name no upstream lists is refused; arguments are facts, never rule text; an upstream's failure is that call's
error, never the guard's crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from ..config import McpConfig
from .policy import ArgumentsTooLarge, McpPolicy, Verdict
from .upstream import Upstreams, connect

DENIED = -32001  # JSON-RPC server error: the guard's policy refused the call
UNKNOWN_TOOL = -32602  # invalid params: no upstream lists that tool


@dataclass
class Approvals:
    """Calls held for an operator, by call id, each bound to the digest of its exact tool and arguments; a decision
    applies once, to that call only."""

    timeout: float
    waiting: dict[str, tuple[str, asyncio.Future[bool]]] = field(default_factory=dict)

    async def wait(self, verdict: Verdict) -> bool:
        """True when an operator approves the held call in time; False when one denies it or time runs out."""
        decided: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiting[verdict.call] = (verdict.digest, decided)
        try:
            return await asyncio.wait_for(decided, self.timeout)
        except TimeoutError:
            return False
        finally:
            self.waiting.pop(verdict.call, None)

    def decide(self, call: str, digest: str, approve: bool) -> bool:
        """Approve or deny a held call; False when no such call waits or the digest is not that call's."""
        held = self.waiting.get(call)
        if held is None or held[0] != digest or held[1].done():
            return False
        held[1].set_result(approve)
        return True


class Guard:
    """The guard's two handlers over connected upstreams, a policy and the approvals waiting."""

    def __init__(self, upstreams: Upstreams, policy: McpPolicy, approvals: Approvals) -> None:
        self.upstreams, self.policy, self.approvals = upstreams, policy, approvals
        for server, tools in upstreams.tools.items():
            policy.add_tools(server, tools)

    async def list_tools(self, _ctx: Any, _params: Any) -> types.ListToolsResult:
        """Every upstream tool, namespaced ``SERVER__TOOL``."""
        return types.ListToolsResult(tools=self.upstreams.exposed())

    async def call_tool(self, _ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        """Decide, then forward, hold or refuse."""
        route = self.upstreams.route(params.name)
        if route is None:
            raise MCPError(UNKNOWN_TOOL, f"no upstream server lists the tool {params.name!r}")
        server, tool = route
        arguments = dict(params.arguments or {})
        try:
            verdict = self.policy.decide(server, tool, arguments, client="stdio")
        except ArgumentsTooLarge as exc:
            raise MCPError(DENIED, f"denied: {exc}") from None
        if verdict.decision == "approve" and not await self.approvals.wait(verdict):
            reason = f"no operator approved the call within {self.approvals.timeout:g} s: {verdict.reasons[0]}"
            raise MCPError(DENIED, f"denied: {reason}", _details(verdict))
        if verdict.decision == "deny":
            raise MCPError(DENIED, f"denied by policy: {'; '.join(verdict.reasons)}", _details(verdict))
        try:
            result: types.CallToolResult = await self.upstreams.sessions[server].call_tool(tool, arguments)
        except MCPError:
            raise  # the upstream's own protocol error, passed on as it is
        except Exception as exc:  # the upstream died or broke its protocol: this call's error
            raise MCPError(-32603, f"the upstream server {server} failed: {type(exc).__name__}: {exc}") from None
        return result


def _details(verdict: Verdict) -> dict[str, Any]:
    return {"call": verdict.call, "decision": verdict.decision, "reasons": verdict.reasons, "digest": verdict.digest,
            "why": verdict.why}  # fmt: skip


async def serve_stdio(config: McpConfig) -> None:
    """Connect the upstreams, then serve MCP on stdin/stdout until the client goes away."""
    async with contextlib.AsyncExitStack() as stack:
        upstreams = await connect(config.servers, stack)
        guard = Guard(upstreams, McpPolicy(list(config.policy)), Approvals(config.approval_timeout_sec))
        server = Server("groundstate-guard", on_list_tools=guard.list_tools, on_call_tool=guard.call_tool)
        tools = sum(len(t) for t in upstreams.tools.values())
        print(f"groundstate mcp guard: {len(upstreams.tools)} upstream server(s), {tools} tools, on stdio",
              file=sys.stderr, flush=True)  # fmt: skip
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
