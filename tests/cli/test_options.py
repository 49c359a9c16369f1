"""Each command-line option changes what the command does: run with it and without it (subprocesses, as a user
runs them). The options of run, serve and the configuration are in their own packages' tests."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import zmq

from groundstate import __version__
from groundstate.providers import default_model_path
from groundstate.wire.zmq_transport import topic

from ..packets.conftest import envelope, text
from ..runtime.conftest import Script
from ..runtime.conftest import envelope as agent_envelope
from ..wire.test_transports import conversation


def groundstate(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run([sys.executable, "-m", "groundstate", *args], capture_output=True, text=True, timeout=180,
                          cwd=cwd, env=env, input=stdin)  # fmt: skip


def test_version() -> None:
    assert groundstate("--version").stdout.strip() == f"groundstate {__version__}"


def test_logic_check_bounds(tmp_path: Path) -> None:
    program = tmp_path / "p.mg"
    program.write_text('Decl age(N) bound [/number].\nage("old").\n')
    for command in ("check", "run"):
        assert groundstate("logic", command, str(program)).returncode != 0  # bounds are checked by default
        assert groundstate("logic", command, str(program), "--no-check-bounds").returncode == 0
        assert groundstate("logic", command, str(program), "--check-bounds").returncode != 0


def test_packets_validate_limits_and_allow(tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    output.write_text(text(envelope(["task_status(/a, /pending)", "task_status(/b, /pending)"])))

    def report(*options: str) -> dict[str, object]:
        return dict(json.loads(groundstate("packets", "validate", str(output), *options).stdout))

    assert report()["accepted_updates"] == ["task_status(/a, /pending)", "task_status(/b, /pending)"]
    assert report("--max-updates", "1")["accepted_updates"] == ["task_status(/a, /pending)"]
    assert report("--max-update-chars", "10")["accepted_updates"] == []
    assert report("--allow", "user_intent")["accepted_updates"] == []  # task_status is not allowed then


def test_packets_gate_prefix_and_allow(tmp_path: Path) -> None:
    output = tmp_path / "out.txt"
    output.write_text("x" * 100 + text(envelope(["task_status(/a, /pending)"])))

    def gate(*options: str) -> dict[str, object]:
        return dict(json.loads(groundstate("packets", "gate", str(output), *options).stdout))

    assert gate()["decision"] == "accepted"
    assert gate("--prefix-bytes", "50")["decision"] == "aborted"  # the packet starts after 100 characters
    output.write_text(text(envelope(["task_status(/a, /pending)"])))
    assert gate()["accepted_updates"] == ["task_status(/a, /pending)"]
    assert gate("--allow", "user_intent")["accepted_updates"] == []  # task_status is not allowed then


def test_kernel_step_request(tmp_path: Path) -> None:
    packet = tmp_path / "out.json"
    packet.write_text(json.dumps(agent_envelope("ok")))
    (tmp_path / "ws").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "GROUNDSTATE_CONFIG"}
    done = groundstate("kernel", "step", "--packet", str(packet), "--workspace", str(tmp_path / "ws"),
                       "--request", "write_file notes.txt hello", cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ws" / "notes.txt").read_text() == "hello"


def test_wire_vocab_and_max_payload(tmp_path: Path) -> None:
    model = str(default_model_path())
    source = tmp_path / "t.txt"
    source.write_text("Hello wonderful world\n")
    assert groundstate("wire", "encode", str(source), "-o", str(tmp_path / "b.sigil")).returncode == 0
    assert groundstate("wire", "encode", str(source), "-o", str(tmp_path / "g.sigil"), "--vocab", model).returncode == 0
    assert "vocabulary gguf:" in groundstate("wire", "decode", str(tmp_path / "g.sigil")).stdout
    unknown = groundstate("wire", "decode", str(tmp_path / "g.sigil")).stdout
    known = groundstate("wire", "decode", str(tmp_path / "g.sigil"), "--vocab", model).stdout
    assert "not in the byte vocabulary" in unknown and "'Hello wonderful world\\n'" in known
    small = tmp_path / "s.sigil"
    assert groundstate("wire", "encode", str(source), "-o", str(small), "--max-payload", "16").returncode == 0
    assert small.stat().st_size > (tmp_path / "b.sigil").stat().st_size  # more, smaller frames
    assert (
        groundstate("wire", "decode", str(small)).stdout
        == groundstate("wire", "decode", str(tmp_path / "b.sigil")).stdout
    )
    groundstate("wire", "profile", str(source), "-o", str(tmp_path / "p.json"), "--vocab", model)
    profile = json.loads((tmp_path / "p.json").read_text())
    assert profile["vocabulary"].startswith("gguf:") and profile["tokens"] == 4  # tokens, not 22 bytes


def test_wire_tail_stream_and_vocab() -> None:
    context: Any = zmq.Context.instance()
    publisher = context.socket(zmq.PUB)
    port = publisher.bind_to_random_port("tcp://127.0.0.1")
    command = ["wire", "tail", "--connect", f"tcp://127.0.0.1:{port}", "--stream", "5", "--jsonl", "--idle", "4",
               "--vocab", "bytes"]  # fmt: skip
    tail = subprocess.Popen([sys.executable, "-m", "groundstate", *command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 3  # PUB drops what it sends before the subscription arrives: keep sending a while
    while time.monotonic() < deadline:
        for stream in (4, 5):
            for frame in conversation(stream):
                publisher.send_multipart([topic(stream), frame])
        time.sleep(0.2)
    out, err = tail.communicate(timeout=60)
    publisher.close()
    streams = {json.loads(line)["stream"] for line in out.splitlines()}
    assert streams == {5}, err  # stream 4 was not asked for


def test_run_max_decisions(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [agent_envelope("Nothing. [STATUS: NULL]")]}
    (tmp_path / "flow.yaml").write_text("name: m\nagents:\n  - id: writer_a\n    instructions: Write.\n")
    env = {k: v for k, v in os.environ.items() if k != "GROUNDSTATE_CONFIG"} | {"GROUNDSTATE_HOME": str(tmp_path)}
    (tmp_path / "new.txt").write_text("Write anything at all.")  # a retry with new instructions may help: it goes on
    done = groundstate("run", "flow.yaml", "--model", f"openai-chat:m@{url}", "--decide", "retry", "--instructions",
                       "new.txt", "--max-decisions", "2", cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 3 and len(script.requests) == 3  # the first attempt and two retries, then it stops
    assert "stopped after 2 decisions (--max-decisions 2)" in done.stdout


def test_serve_host(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.2", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "GROUNDSTATE_CONFIG"} | {"GROUNDSTATE_HOME": str(tmp_path)}
    server = subprocess.Popen([sys.executable, "-m", "groundstate", "serve", "--host", "127.0.0.2", "--port",
                               str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(300):
            try:
                assert httpx.get(f"http://127.0.0.2:{port}/login", timeout=1).status_code == 200
                break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise AssertionError("the console did not start on 127.0.0.2")
        try:
            httpx.get(f"http://127.0.0.1:{port}/login", timeout=1)
            raise AssertionError("the console answered on 127.0.0.1 too")
        except httpx.TransportError:
            pass  # bound to the given address only
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("command", [["serve"], ["gateway", "--upstream", "https://api.example", "--listen"]])
def test_the_console_and_the_gateway_run_on_asyncios_loop_even_with_uvloop_installed(
    tmp_path: Path, command: list[str]
) -> None:
    """uvicorn runs on uvloop whenever it is installed (``uvicorn[standard]`` installs it); the console and the
    gateway ask for asyncio's loop, the one their tests and the runtime's run on — uvloop's transports are not
    asyncio's (the gateway's upstream hop once failed every request on them). Read from the running process: uvloop
    was never loaded into it."""
    assert importlib.util.find_spec("uvloop") is not None  # installed here (the dev extra): else nothing to tell
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    where = ["--port", str(port)] if command == ["serve"] else [f"127.0.0.1:{port}"]
    env = {k: v for k, v in os.environ.items() if k != "GROUNDSTATE_CONFIG"} | {"GROUNDSTATE_HOME": str(tmp_path)}
    server = subprocess.Popen([sys.executable, "-m", "groundstate", *command, *where], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(300):
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise AssertionError(f"{command[0]} did not start")
        mapped = Path(f"/proc/{server.pid}/maps").read_text()
        assert "asyncio" in mapped or "_asyncio" in mapped  # the check reads what the process loaded
        assert "uvloop" not in mapped
    finally:
        server.terminate()
        server.wait(timeout=10)


FREEZE_PROBE = """
import os
import sys
from pathlib import Path

import groundstate.long_lived as long_lived

MARKER = Path(sys.argv[1])

def started() -> None:  # the command reached the point where it owns its process: say so, and stop there
    MARKER.write_text("started")
    os._exit(0)  # (a SystemExit in the gateway's lifespan is the server's to swallow)

long_lived.started = started
sys.argv = ["groundstate", *sys.argv[2:]]
from groundstate.cli import main

main()
"""


@pytest.mark.parametrize("command", ["run", "serve", "demo", "gateway", "mcp serve"])
def test_each_command_that_owns_its_process_freezes_what_it_started_with(tmp_path: Path, command: str) -> None:
    """``long_lived.started`` (``gc.freeze`` of what the start built: a quarter of the gateway's CPU per stream, a
    sixth of a workflow node's time) is called by every command that owns its process, once it has started — read
    through a probe that replaces it and stops the command there."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    (tmp_path / "flow.yaml").write_text("name: m\nagents:\n  - id: writer_a\n    instructions: Write.\n")
    inbox = Path(__file__).parent.parent / "guard" / "inbox_server.py"
    (tmp_path / "groundstate.toml").write_text(f'[mcp.servers.mail]\ncommand = ["{sys.executable}", "{inbox}"]\n'
                                               f'env = {{ INBOX_SENT = "{tmp_path / "sent.txt"}" }}\n')  # fmt: skip
    arguments = {"run": ["run", "flow.yaml", "--model", "openai-chat:m@http://127.0.0.1:9"],
                 "serve": ["serve", "--port", port],
                 "demo": ["demo", "--port", port, "--decide", "abort", "--model", "openai-chat:m@http://127.0.0.1:9"],
                 "gateway": ["gateway", "--upstream", "https://api.example", "--listen", f"127.0.0.1:{port}"],
                 "mcp serve": ["mcp", "serve", "--config", "groundstate.toml"]}[command]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "GROUNDSTATE_CONFIG"} | {"GROUNDSTATE_HOME": str(tmp_path)}
    marker = tmp_path / "started.txt"
    with contextlib.suppress(subprocess.TimeoutExpired):  # a command that never calls it serves on: stopped
        subprocess.run([sys.executable, "-c", FREEZE_PROBE, str(marker), *arguments], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60, stdin=subprocess.PIPE)  # fmt: skip
    assert marker.exists() and marker.read_text() == "started", f"{command} never called long_lived.started"
