"""The guard's stdio transport passes messages longer than a stream reader's default 64 KiB line both ways, and
the session goes on after them."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

TOOLS = '''
import groundstate

@groundstate.tool(sandboxed=False, read_only=True)
def echo(text: str) -> str:
    """Say it back."""
    return text
'''


def project(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "echoing.py").write_text(TOOLS)
    (tmp_path / "groundstate.toml").write_text('[tools]\nmodules = ["echoing"]\n')
    return {"GROUNDSTATE_HOME": str(tmp_path / "home"), "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")}


def test_long_messages_both_ways_then_short_ones(tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "groundstate", "mcp", "serve"],
                                   cwd=str(tmp_path), env=project(tmp_path))  # fmt: skip
    long = "x" * 300_000  # a request line of ~300 KB, beyond a stream reader's default 64 KiB line; the reply is cut
    # to a Python tool's 65,536 characters, a line still longer than that

    async def session() -> list[str]:
        errors = (tmp_path / "stderr.txt").open("w")
        async with stdio_client(params, errlog=errors) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            replies = []
            for text in (long, "short", long + "y", "again"):
                result = await client.call_tool("python__echo", {"text": text})
                replies.append(result.content[0].text)  # type: ignore[union-attr]
            return replies

    replies = asyncio.run(asyncio.wait_for(session(), 120))
    assert replies[1::2] == ["short", "again"]
    for reply in replies[::2]:
        assert reply.startswith("x" * 65_536) and 65_536 < len(reply) < 66_000 and "y" not in reply
