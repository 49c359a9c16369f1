"""The TypeScript MCP SDK (``@modelcontextprotocol/sdk`` from npm), as a Node agent uses it, against the guard:
a held call the client aborts (its ``AbortSignal``: the SDK sends ``notifications/cancelled``) is withdrawn; a held
call approved after longer than the client's request timeout still answers, because the guard's progress
notifications reset that timeout (``resetTimeoutOnProgress``). The SDK is installed in ``.node-clients`` beside the
checkout on first use; without npm the tests fail, except outside CI where they are skipped saying why."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from groundstate.guard import Ledger

from .test_attacks import SERVER

NODE_CLIENTS = Path(__file__).parents[2] / ".node-clients"
SDK = "@modelcontextprotocol/sdk@1"

CLIENT = """
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mode, effects] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: process.env.GUARD_PYTHON,
  args: ["-m", "groundstate", "mcp", "serve"], env: process.env, stderr: "inherit" });
const client = new Client({ name: "node-agent", version: "1.0.0" });
await client.connect(transport);
const call = { name: "lying__append", arguments: { path: effects } };
if (mode === "abort") {
  const controller = new AbortController();
  setTimeout(() => controller.abort("the user gave up"), 1500);
  try {
    await client.callTool(call, undefined, { signal: controller.signal });
    console.log("RESULT unexpected");
  } catch (error) {
    console.log("ABORTED " + String(error.message ?? error).slice(0, 80));
  }
  await new Promise((done) => setTimeout(done, 1500));  // the cancellation reaches the guard
} else {
  let progress = 0;
  const result = await client.callTool(call, undefined, { timeout: 2000, resetTimeoutOnProgress: true,
    maxTotalTimeout: 60000, onprogress: () => { progress += 1; } });
  console.log("RESULT " + JSON.stringify(result.content) + " PROGRESS " + progress);
}
await client.close();
"""


@pytest.fixture(scope="module")
def node_sdk() -> Path:
    """The directory whose node_modules hold the TypeScript SDK (installed once, under a lock)."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("node and npm are needed for the TypeScript SDK tests (apt-get install nodejs npm)")
        pytest.skip("node and npm are not installed: the TypeScript SDK tests need them (apt-get install nodejs npm)")
    NODE_CLIENTS.mkdir(exist_ok=True)
    with open(NODE_CLIENTS.parent / ".node-clients.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (NODE_CLIENTS / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
            (NODE_CLIENTS / "package.json").write_text('{"name": "gs-node-clients", "private": true}\n')
            done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", SDK], cwd=NODE_CLIENTS,
                                  capture_output=True, text=True, timeout=600)  # fmt: skip
            if done.returncode != 0:
                pytest.fail(f"cannot install {SDK} from npm: {done.stderr[-2000:]}")
    return NODE_CLIENTS


def run_client(node_sdk: Path, tmp_path: Path, mode: str, hold_wait: float) -> subprocess.CompletedProcess[str]:
    (tmp_path / "hold.mg").write_text('mcp_needs_approval(C, "an operator decides") :- '
                                      'mcp_call(C, "lying", "append", _, _).\n')  # fmt: skip
    (tmp_path / "groundstate.toml").write_text(
        f'[mcp]\napproval_timeout_sec = 60\nhold_wait_sec = {hold_wait}\npolicy = ["{tmp_path / "hold.mg"}"]\n'
        f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n'
    )
    script = node_sdk / f"client-{os.getpid()}-{mode}.mjs"  # beside node_modules: the SDK resolves from there
    script.write_text(CLIENT)
    env = {**os.environ, "GUARD_PYTHON": sys.executable, "GROUNDSTATE_HOME": str(tmp_path / "home"),
           "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")}  # fmt: skip
    try:
        return subprocess.run(["node", str(script), mode, str(tmp_path / "effects.txt")], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    finally:
        script.unlink()


def test_an_aborted_held_call_is_withdrawn(node_sdk: Path, tmp_path: Path) -> None:
    done = run_client(node_sdk, tmp_path, "abort", hold_wait=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ABORTED" in done.stdout and "Traceback" not in done.stderr
    [entry] = Ledger(f"sqlite:///{tmp_path / 'home' / 'groundstate.db'}").entries()
    assert (entry.status, entry.ended) == ("withdrawn", "its client cancelled the call or went away")
    assert not (tmp_path / "effects.txt").exists()


def test_progress_keeps_a_client_waiting_past_its_timeout(node_sdk: Path, tmp_path: Path) -> None:
    approved: list[int] = []

    def approve_after(seconds: float) -> None:
        store = tmp_path / "home" / "groundstate.db"
        for _ in range(600):
            if store.exists():
                held = Ledger(f"sqlite:///{store}").waiting()
                if held:
                    time.sleep(seconds)  # longer than the client's 2 s request timeout
                    Ledger(f"sqlite:///{store}").decide(held[0].id, True, "dana")
                    approved.append(held[0].id)
                    return
            time.sleep(0.05)

    operator = threading.Thread(target=approve_after, args=(5.0,), daemon=True)
    operator.start()
    done = run_client(node_sdk, tmp_path, "wait", hold_wait=60)
    operator.join(30)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    content, progress = line.removeprefix("RESULT ").rsplit(" PROGRESS ", 1)
    assert json.loads(content) == [{"type": "text", "text": "appended"}] and int(progress) >= 3
    assert approved and (tmp_path / "effects.txt").read_text() == "ran\n"
