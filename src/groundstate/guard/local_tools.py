"""Your own Python tools (``@groundstate.tool``) served by the guard beside the upstream servers, as the server
``python`` (``python__NAME``): listed with their schemas (read-only ones marked so), decided by the same policy,
journaled and held like any upstream tool, and run by the kernel's ``python_tool`` executor — in the OS sandbox
unless a tool says otherwise, with ``$GROUNDSTATE_HOME/mcp-workspace`` as the only place it may write."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import mcp_types as types

from .. import tools
from ..config import LOCAL_TOOLS_SERVER
from ..kernel import Action, ShardProfile, VirtualStore, Workspace

SERVER = LOCAL_TOOLS_SERVER  # the name the guard lists them under; a configured upstream may not take it


def listed() -> list[types.Tool]:
    """The registered tools as MCP tools. They are your own code (``@groundstate.tool``), so they are closed world
    (``openWorldHint`` false): their results are not content written by others and a call to one is no way out —
    the provenance rules leave them alone (a sandboxed one reaches no network either)."""
    return [types.Tool(name=t.name, description=t.description, input_schema=t.schema,
                       annotations=types.ToolAnnotations(read_only_hint=t.read_only,
                                                         destructive_hint=not t.read_only,
                                                         open_world_hint=False))
            for t in tools.REGISTRY.values()]  # fmt: skip


class LocalTools:
    """A session-like object over the registered tools: ``call_tool`` as an upstream session has it."""

    def __init__(self, workspace: Path) -> None:
        workspace.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.store = VirtualStore(Workspace(workspace))
        self.profile = ShardProfile()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Run the tool (in a worker thread: a sandboxed run waits for its process)."""
        action = Action(f"/mcp/{uuid.uuid4().hex[:12]}", name, "", json.dumps(arguments))
        outcome = await asyncio.to_thread(self.store.run, "python_tool", action, self.profile)
        return types.CallToolResult(content=[types.TextContent(type="text", text=outcome.output)],
                                    is_error=not outcome.ok)  # fmt: skip
