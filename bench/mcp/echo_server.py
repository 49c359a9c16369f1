"""A minimal MCP server (the official SDK, stdio): one read-only tool, ``echo``, that answers at once — so a benchmark
measures the path in front of it, not the tool. It reads nothing others wrote and reaches nothing outside, so it says
so (``openWorldHint: false``): left out, MCP's default (open world) made the provenance rules deny the warm-up's
repeated text (taken from the echo's own result) and hold every call once the session passed its 200 calls — the
full benchmark waited on held calls."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ECHO = types.Tool(name="echo", description="Returns its text.", input_schema=TEXT,
                  annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False))  # fmt: skip


async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ECHO])


async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main() -> None:
    server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
