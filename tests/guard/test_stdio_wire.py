"""The guard's stdio transport passes messages longer than a stream reader's default 64 KiB line both ways, and
the session goes on after them."""

from __future__ import annotations

import asyncio
import os
import subprocess
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


def test_a_guard_whose_input_or_output_is_the_null_device_ends_at_once(tmp_path: Path) -> None:
    """Found by an attack: ``groundstate mcp serve </dev/null`` printed a traceback and then waited forever — the
    null device is a character device, which the guard took for a pipe its loop could watch, and epoll refuses it.
    Now it reads the end of its input at once and exits 0, whichever of its standard streams is the null device."""
    env = {**os.environ, **project(tmp_path)}
    for stdin, stdout in ((subprocess.DEVNULL, subprocess.PIPE), (subprocess.DEVNULL, subprocess.DEVNULL)):
        done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve"], cwd=tmp_path, env=env,
                              stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=30)  # fmt: skip
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
