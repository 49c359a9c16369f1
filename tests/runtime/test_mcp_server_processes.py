"""The MCP servers a workflow run starts leave nothing behind: through ``groundstate run``, a daemon one of them
left (forked twice, its parent gone, init's until now) is stopped when the run's command ends, and a command killed
outright (SIGKILL: no handler runs) takes its servers with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..guard.test_upstream_start import DAEMON, HUNG, alive, kill_left, pid_in, until, written_pid
from ..guard.test_upstream_wire import RAW
from .conftest import Script, envelope

FLOW = """
name: probing
agents:
  - id: writer_prober
    instructions: probe the server
    tools: [mcp:raw/probe]
"""


def command_env(tmp_path: Path, servers: str) -> dict[str, str]:
    """``groundstate run``'s environment: its home, and a configuration naming ``servers``."""
    (tmp_path / "groundstate.toml").write_text(servers)
    return {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"),
            "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")}  # fmt: skip


def started(tmp_path: Path, url: str, servers: str) -> subprocess.Popen[Any]:
    (tmp_path / "flow.yaml").write_text(FLOW)
    command = [sys.executable, "-m", "groundstate", "run", "flow.yaml", "--model", f"openai-chat:scripted@{url}"]
    return subprocess.Popen(command, cwd=tmp_path, env=command_env(tmp_path, servers), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_a_daemon_a_workflows_server_left_behind_ends_with_the_run(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_prober": [envelope("probed [STATUS: SUCCESS]")]}
    pid_file = tmp_path / "daemon.pid"
    daemon = DAEMON.format(pid=str(pid_file))
    servers = (f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "{RAW}"]\n'
               f"env = {{ RAW_UPSTREAM_CHILD = {json.dumps(daemon)} }}\n")  # fmt: skip
    run = started(tmp_path, url, servers)
    try:
        pid = written_pid(pid_file)
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0 and "Traceback" not in stderr, stdout + stderr
        assert stdout.strip().endswith("completed"), stdout
        assert until(lambda: not alive(pid), 5), "a daemon the workflow's server left behind outlived the run"
    finally:
        run.kill()
        kill_left(pid_in(pid_file))


def test_a_run_killed_outright_takes_its_servers_with_it(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, _ = model
    pid_file = tmp_path / "server.pid"
    code = HUNG.format(pid=str(pid_file))
    run = started(tmp_path, url, f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "-c", {json.dumps(code)}]\n')
    try:
        pid = written_pid(pid_file)  # the run waits for the server to answer; it never will
        run.kill()
        run.wait(timeout=10)
        assert until(lambda: not alive(pid), 5), "the workflow's server outlived the run killed outright"
    finally:
        run.kill()
        kill_left(pid_in(pid_file))
