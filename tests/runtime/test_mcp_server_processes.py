"""The MCP servers a workflow run starts leave nothing behind: through ``groundstate run``, a daemon one of them
left (forked twice, its parent gone, init's until now) is stopped when the run's command ends, and a command killed
outright (SIGKILL: no handler runs) takes its servers with it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..guard.test_upstream_start import (
    DAEMON,
    HUNG,
    WRAPPER,
    alive,
    ends_with_a_kill,
    kill_left,
    pid_in,
    raw_with_child,
    until,
    written_pid,
)
from ..guard.test_upstream_wire import RAW
from ..providers.conftest import free_port
from .conftest import Script, console_client, envelope

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


def leaving_a_daemon(pid_file: Path) -> str:
    """The configuration of the hand-written server, which starts a daemon that writes its pid to ``pid_file``."""
    return raw_with_child(DAEMON.format(pid=str(pid_file)))


def test_a_daemon_a_workflows_server_left_behind_ends_with_the_run(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_prober": [envelope("probed [STATUS: SUCCESS]")]}
    pid_file = tmp_path / "daemon.pid"
    servers = leaving_a_daemon(pid_file)
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
    # the run waits for the server to answer; it never will
    assert ends_with_a_kill(run, pid_file), "the workflow's server outlived the run killed outright"


def test_a_run_killed_outright_takes_what_its_server_left_with_it(tmp_path: Path, model: tuple[str, Script]) -> None:
    """A server that leaves a daemon (forked twice, ignoring SIGTERM) and never answers: killed outright, the run
    stops nothing, and the daemon ran on as init's. The server's keeper stops it."""
    url, _ = model
    pid_file = tmp_path / "daemon.pid"
    code = WRAPPER.format(code=DAEMON.format(pid=str(pid_file)))
    run = started(tmp_path, url, f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "-c", {json.dumps(code)}]\n')
    assert ends_with_a_kill(run, pid_file), "a daemon of the workflow's server outlived the run killed outright"


def test_a_daemon_a_resumed_runs_server_left_behind_ends_with_runs_resume(tmp_path: Path,
                                                                          model: tuple[str, Script]) -> None:
    """The same through ``groundstate runs resume``: the run paused (its model failed), the operator decided
    retry, and the resuming command starts the server again — the daemon it leaves ends with that command."""
    url, script = model
    script.answers = {"writer_prober": [(401, b'{"error": {"message": "bad key"}}'),
                                        envelope("probed [STATUS: SUCCESS]")]}  # fmt: skip
    pid_file = tmp_path / "daemon.pid"
    servers = leaving_a_daemon(pid_file)
    env = command_env(tmp_path, servers)
    first = started(tmp_path, url, servers)
    stdout, stderr = first.communicate(timeout=120)
    assert "awaiting_approval" in stdout, stdout + stderr
    run_id = stdout.strip().split()[1].rstrip(":")
    kill_left(pid_in(pid_file))
    pid_file.unlink(missing_ok=True)
    pause = stdout.rsplit("--pause ", 1)[1].split()[0]
    groundstate = [sys.executable, "-m", "groundstate", "runs"]
    decided = subprocess.run([*groundstate, "decide", run_id, "retry", "--pause", pause], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert decided.returncode == 0, decided.stdout + decided.stderr
    resumed = subprocess.Popen([*groundstate, "resume", run_id], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        if not until(pid_file.exists, 60):  # (once, on CI's loaded machine, not within 30 s: say what it did)
            resumed.kill()
            said = resumed.communicate(timeout=10)
            raise AssertionError(f"the resumed run's server wrote no pid within 60 s: {said}")
        pid = written_pid(pid_file)
        stdout, stderr = resumed.communicate(timeout=120)
        assert resumed.returncode == 0 and "Traceback" not in stderr, stdout + stderr
        assert until(lambda: not alive(pid), 5), "a daemon the resumed run's server left behind outlived the command"
    finally:
        resumed.kill()
        kill_left(pid_in(pid_file))


def console_run_leaves_nothing(console: subprocess.Popen[str], port: int, tmp_path: Path, pid_file: Path,
                               lasting: bool = False) -> bool:
    """Whether, after a run started through ``console``'s API on ``port`` completed and the console was sent
    SIGTERM (it ends without a traceback), the daemon that wrote ``pid_file`` ends within 5 s; with ``lasting``, it
    is first checked to run on while the console does. Whatever is left is killed afterwards."""
    try:
        client = console_client(port, tmp_path / "home")
        run_id = client.post("/api/runs", json={"workflow": FLOW}).json()["run_id"]
        assert until(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "completed", 60)
        pid = written_pid(pid_file)
        if lasting:
            assert alive(pid)  # the console runs on: so does what its runs' servers left, until it ends
        console.send_signal(signal.SIGTERM)
        _, stderr = console.communicate(timeout=60)
        assert "Traceback" not in stderr, stderr
        return until(lambda: not alive(pid), 5)
    finally:
        console.kill()
        kill_left(pid_in(pid_file))


def test_a_daemon_a_served_runs_server_left_behind_ends_with_serve(tmp_path: Path, model: tuple[str, Script]) -> None:
    """And through ``groundstate serve``: a run started over the API starts the server; the daemon it leaves is
    the console's, and ends when the console is told to stop."""
    url, script = model
    script.answers = {"writer_prober": [envelope("probed [STATUS: SUCCESS]")]}
    pid_file = tmp_path / "daemon.pid"
    env = command_env(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n' + leaving_a_daemon(pid_file))
    (tmp_path / "home").mkdir()
    port = free_port()
    served = subprocess.Popen([sys.executable, "-m", "groundstate", "serve", "--port", str(port)], cwd=tmp_path,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert console_run_leaves_nothing(served, port, tmp_path, pid_file, lasting=True), \
        "a daemon a served run's server left behind outlived the console"


def test_a_daemon_of_a_run_started_from_demos_console_ends_with_demo(tmp_path: Path,
                                                                    model: tuple[str, Script]) -> None:
    """``groundstate demo`` drives the runs its console starts, as ``serve`` does: what their servers leave ends
    when it is told to stop."""
    url, script = model
    script.answers = {"writer_prober": [envelope("probed [STATUS: SUCCESS]")]}
    pid_file = tmp_path / "daemon.pid"
    env = command_env(tmp_path, leaving_a_daemon(pid_file))
    (tmp_path / "home").mkdir()
    port = free_port()
    demo = subprocess.Popen([sys.executable, "-m", "groundstate", "demo", "--port", str(port), "--model",
                             f"openai-chat:m@{url}"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert console_run_leaves_nothing(demo, port, tmp_path, pid_file), \
        "a daemon of a run started from demo's console outlived demo"


def test_a_runs_servers_are_stopped_as_a_client_should_before_anything_harder(tmp_path: Path,
                                                                                 model: tuple[str, Script]) -> None:
    """Found by an attack: the run's command never closed its servers, and its last pass over what is below it sent
    them SIGTERM while their input was still open — a server's own clean-up never ran. Now each gets the end of its
    input and time to leave first."""
    url, script = model
    script.answers = {"writer_prober": [envelope("probed [STATUS: SUCCESS]")]}
    notes = tmp_path / "notes"
    notes.mkdir()
    servers = "".join(f'[mcp.servers.raw{i}]\ncommand = ["{sys.executable}", "{RAW}"]\n'
                      f"env = {{ RAW_UPSTREAM_ON_EOF = {json.dumps(str(notes))} }}\n" for i in ("", "2"))  # fmt: skip
    run = started(tmp_path, url, servers)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0 and "Traceback" not in stderr, stdout + stderr
    cleaned = sorted(note.name.split(".")[0] for note in notes.iterdir())
    assert cleaned == ["clean", "clean", "eof", "eof"], cleaned


def test_commands_that_start_no_server_stop_nothing_they_did_not_start(tmp_path: Path) -> None:
    """Found by an attack: every ``runs`` command (``runs list`` too) stopped, when it ended, the processes that
    were already there — ``sidecar & exec groundstate …`` lost its sidecar. Only the commands that start servers
    adopt what is left below them, and none stops a process it inherited."""
    pid_file = tmp_path / "sidecar.pid"
    env = command_env(tmp_path, "")
    for command in (["runs", "list"], ["run", "missing.yaml"], ["runs", "resume", "run-none"]):
        sidecar = f"sleep 300 >/dev/null 2>&1 & echo $! > {pid_file}"
        line = f"{sidecar}; exec {sys.executable} -m groundstate {' '.join(command)}"
        done = subprocess.run(["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        pid = written_pid(pid_file)
        try:
            assert "Traceback" not in done.stderr, done.stderr
            assert alive(pid), f"groundstate {' '.join(command)} stopped a process it did not start"
        finally:
            kill_left([pid])
