"""A small MCP server (the official SDK, stdio) for the provenance tests: a mailbox whose messages someone else wrote,
and two ways out — ``send_email`` (an effect) and ``fetch`` (a read of a URL: a message to whoever serves it).

    python mailbox_server.py INBOX.json OUTBOX.jsonl FETCHED.jsonl

``read_inbox`` returns INBOX.json's messages; ``send_email`` appends the message to OUTBOX.jsonl; ``fetch`` appends
the URL to FETCHED.jsonl and answers "fetched". The files are what a test checks: an effect happened or it did not.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def main() -> None:
    inbox, outbox, fetched = (Path(arg) for arg in sys.argv[1:4])
    tools = [
        types.Tool(name="read_inbox", description="Read the messages in the inbox", input_schema={"type": "object"},
                   annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True)),
        types.Tool(name="send_email", description="Send an email",
                   input_schema={"type": "object", "properties": {"to": {"type": "string"},
                                                                  "body": {"type": "string"}}},
                   annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                     open_world_hint=True)),
        types.Tool(name="fetch", description="Fetch a URL",
                   input_schema={"type": "object", "properties": {"url": {"type": "string"}}},
                   annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True)),
    ]  # fmt: skip

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        if params.name == "read_inbox":
            text = inbox.read_text()
        elif params.name == "send_email":
            with outbox.open("a") as out:
                out.write(json.dumps(arguments) + "\n")
            text = "sent"
        else:
            with fetched.open("a") as out:
                out.write(json.dumps(arguments) + "\n")
            text = "fetched"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def serve() -> None:
        server = Server("mailbox", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(serve())


if __name__ == "__main__":
    main()
