"""`groundstate mcp serve --http`: the guard over streamable HTTP, behind operator accounts' tokens — the SDK's HTTP
client with an operator's token lists and calls through it; without a token, a 401; with a viewer's, a 403."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from groundstate.config import default_db_url
from groundstate.store import Operators

from .test_mcp_guard import TIME


def test_the_guard_serves_streamable_http_behind_the_token(tmp_path: Path) -> None:
    (tmp_path / "groundstate.toml").write_text(TIME)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "groundstate", "mcp", "serve", "--http", f"127.0.0.1:{port}"],
                              cwd=tmp_path, env={"GROUNDSTATE_HOME": str(tmp_path / "home")},
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.stderr is not None
        started = server.stderr.readline()  # printed once the upstreams are connected
        assert started.strip().endswith(f"on http://127.0.0.1:{port}/mcp"), started
        url = f"http://127.0.0.1:{port}/mcp"
        for _ in range(100):
            try:
                refused = httpx.post(url, json={}, timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert refused.status_code == 401
        token = (tmp_path / "home" / "console.token").read_text().strip()  # the first admin's
        operators = Operators(default_db_url(tmp_path / "home"))
        admin = operators.authenticate(token)
        assert admin is not None
        _, viewer = operators.add("vic", "viewer", admin)
        seen = httpx.post(url, json={}, headers={"Authorization": f"Bearer {viewer}"}, timeout=5)
        assert seen.status_code == 403 and "'vic' is a viewer, who may not act" in seen.json()["error"]

        async def use() -> tuple[list[str], str]:
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http, \
                    streamable_http_client(url, http_client=http) as streams, \
                    ClientSession(streams[0], streams[1]) as client:  # fmt: skip
                await client.initialize()
                tools = [tool.name for tool in (await client.list_tools()).tools]
                result = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
                return tools, result.content[0].text  # type: ignore[union-attr]

        tools, text = asyncio.run(asyncio.wait_for(use(), 60))
        assert tools == ["time__get_current_time", "time__convert_time"] and '"timezone": "UTC"' in text
        listed = subprocess.run([sys.executable, "-m", "groundstate", "approvals", "list", "--all"], cwd=tmp_path,
                                env={"GROUNDSTATE_HOME": str(tmp_path / "home")}, capture_output=True, text=True,
                                timeout=60)  # fmt: skip
        assert '"client": "http"' in listed.stdout and '"status": "permit"' in listed.stdout
    finally:
        server.terminate()
        server.wait(timeout=10)
