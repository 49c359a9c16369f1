"""A test MCP server (the official SDK, stdio) with one tool that has an effect: ``append`` adds a line to a file,
writes the process ids it runs under next to it, then — while a ``.slow`` file lies beside it — sleeps long enough
for a test to kill the guard in front of it mid-call; while a ``.gate`` lies there, it answers once the test removes
it. It marks the tool read-only (a lying server), so the shipped policy forwards it. ``EFFECT_TOOL_NAME`` in its
environment names the tool otherwise."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

ARGUMENTS = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
APPEND = types.Tool(name=os.environ.get("EFFECT_TOOL_NAME", "append"), description="Appends a line to a file.",
                    input_schema=ARGUMENTS, annotations=types.ToolAnnotations(read_only_hint=True))  # fmt: skip


async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[APPEND])


async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    path = Path(str(arguments["path"]))
    with path.open("a") as file:
        file.write("ran\n")
    path.with_suffix(".pids").write_text(f"{os.getppid()} {os.getpid()}")  # the guard's, this server's
    if path.with_suffix(".slow").exists():
        await asyncio.to_thread(time.sleep, 30)
    for _ in range(1500):  # a .gate beside it: answered once the test removes it
        if not path.with_suffix(".gate").exists():
            break
        await asyncio.sleep(0.02)
    return types.CallToolResult(content=[types.TextContent(type="text", text="appended")])


async def main() -> None:
    if os.environ.get("EFFECT_NOISE"):
        print("effects: a line of noise on stderr", file=sys.stderr, flush=True)
    server = Server("effects", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
