"""The guard's stdio wire is only MCP: a tool's stray print (flushed at once), a raw write to descriptor 1 and a
child process's output go to stderr, and the session goes on."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

NOISY_TOOLS = '''
import os
import subprocess

import groundstate

@groundstate.tool(sandboxed=False, read_only=True)
def echo(text: str) -> str:
    """Say it back (and print something stray on the way)."""
    print("stray output that must not reach the wire", flush=True)
    os.write(1, b"a raw write to descriptor 1\\n")
    subprocess.run(["echo", "a child's output"], check=True)
    return text
'''


def test_a_tools_stray_print_goes_to_stderr_not_into_the_wire(tmp_path: Path) -> None:
    (tmp_path / "noisy.py").write_text(NOISY_TOOLS)
    (tmp_path / "groundstate.toml").write_text('[tools]\nmodules = ["noisy"]\n')
    params = StdioServerParameters(command=sys.executable, args=["-m", "groundstate", "mcp", "serve"],
                                   cwd=str(tmp_path), env={"GROUNDSTATE_HOME": str(tmp_path / "home"),
                                                           "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")},
                                   )  # fmt: skip
    errors = (tmp_path / "stderr.txt").open("w+")

    async def session() -> list[str]:
        async with stdio_client(params, errlog=errors) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            answers = []
            for text in ("one", "two"):
                result = await client.call_tool("python__echo", {"text": text})
                answers.append(result.content[0].text)  # type: ignore[union-attr]
            return answers

    assert asyncio.run(asyncio.wait_for(session(), 120)) == ["one", "two"]  # the session survived both prints
    errors.seek(0)
    stray = errors.read()
    assert stray.count("stray output that must not reach the wire") == 2
    assert stray.count("a raw write to descriptor 1") == 2 and stray.count("a child's output") == 2
