"""A real HTTP server on loopback that replays scripted provider responses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..loopback import Reply, loopback


class Script:
    """Responses to serve in order, and the requests received."""

    def __init__(self, responses: list[tuple[int, dict[str, str], bytes]]) -> None:
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    """The loopback server answering with ``script.responses`` in order, in 37-byte writes."""
    script = Script([])

    def respond(path: str, headers: dict[str, str], body: bytes) -> Reply:
        script.requests.append({"path": path, "headers": headers, "body": json.loads(body)})
        status, extra, payload = script.responses.pop(0)
        return Reply(status, {"content-type": "text/event-stream", **extra}, payload, chunk=37)

    with loopback(respond) as url:
        yield url, script


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports, held open together while chosen: two calls of free_port may be given the same
    port (the first is closed before the second is asked for) — a gateway then bound its ZMQ publisher to the port
    its HTTP server needed, and a test talked HTTP to the publisher (a CI run saw the ZMQ greeting as the reply)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for held in sockets:
            held.bind(("127.0.0.1", 0))
        return [int(held.getsockname()[1]) for held in sockets]
    finally:
        for held in sockets:
            held.close()


GatewayFor = Callable[..., tuple[str, str]]  # upstream URL, *options -> (its base URL, its publish address)


@pytest.fixture
def gateway_for(tmp_path: Path) -> Iterator[GatewayFor]:
    """Start gateways (in $GROUNDSTATE_HOME = tmp_path/home, where the metrics token is kept)."""
    processes: list[subprocess.Popen[bytes]] = []
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")}
    env.pop("GROUNDSTATE_CONFIG", None)

    def start(upstream: str, *options: str, environment: dict[str, str] | None = None) -> tuple[str, str]:
        port, pub = free_ports(2)
        process = subprocess.Popen(
            [sys.executable, "-m", "groundstate", "gateway", "--upstream", upstream,
             "--listen", f"127.0.0.1:{port}", "--publish", f"tcp://127.0.0.1:{pub}", *options],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**env, **(environment or {})}, cwd=tmp_path,
        )  # fmt: skip
        processes.append(process)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return f"http://127.0.0.1:{port}/v1", f"tcp://127.0.0.1:{pub}"
            except OSError:
                time.sleep(0.1)
        raise AssertionError("the gateway did not start")

    start.processes = processes  # type: ignore[attr-defined]  # for tests that read a gateway's stderr
    yield start
    for process in processes:
        process.terminate()
        process.communicate(timeout=10)
