"""A call the MCP guard holds is decided in the console's API by an operator: approved with the call's own digest
(a different digest is refused), it goes through once; denied, the client gets the guard's error — and the ledger
says who decided what, when."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession

from ..console.conftest import serving
from .test_mcp_guard import guarded, refusal


def decide_when_held(api: Any, viewer: Any, decision: str, outcome: list[Any]) -> threading.Thread:
    """In the background: wait for a held call; the viewer tries to decide it, a wrong digest is tried, then the
    operator (``api``, dana's account) decides it."""

    def run() -> None:
        for _ in range(600):
            held = api.get("/api/mcp/calls", params={"status": "held"}).json()
            if held:
                call = held[0]
                where = f"/api/mcp/calls/{call['id']}/decision"
                body = {"decision": decision}
                refused = viewer.post(where, json={**body, "digest": call["digest"]})
                named = api.post(where, json={**body, "digest": call["digest"], "operator": "mallory"})
                wrong = api.post(where, json={**body, "digest": "sha256:" + "0" * 64})
                right = api.post(where, json={**body, "digest": call["digest"]})
                outcome.extend([call, wrong.status_code, right.json(), refused.status_code, refused.json(),
                                named.status_code])  # fmt: skip
                return
            time.sleep(0.1)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_an_operator_decides_held_calls_in_the_console(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a")
    config = (f'[mcp]\napproval_timeout_sec = 60\n[mcp.servers.git]\ncommand = ["{sys.executable}", "-m", '
              f'"mcp_server_git", "--repository", "{repo}"]\n')  # fmt: skip
    (tmp_path / "groundstate.toml").write_text(config)
    approved: list[Any] = []
    denied: list[Any] = []
    with serving(tmp_path) as console:
        api = console.api(console.account("dana", "operator"))
        viewer = console.api(console.account("vic", "viewer"))

        async def use(client: ClientSession) -> str:
            worker = decide_when_held(api, viewer, "approve", approved)
            added = await client.call_tool("git__git_add", {"repo_path": str(repo), "files": ["a.txt"]})
            worker.join(10)
            worker = decide_when_held(api, viewer, "deny", denied)
            refused = await refusal(client, "git__git_reset", {"repo_path": str(repo)})
            assert str(refused).startswith("denied: the operator dana denied the call: git/git_reset may destroy")
            assert (refused.data["decision"], refused.data["by"]) == ("deny", "operator:dana")
            worker.join(10)
            return added.content[0].text  # type: ignore[union-attr]

        text = guarded(tmp_path, config, use)
        ledger = api.get("/api/mcp/calls").json()
    assert "a.txt" in text or "Files staged" in text
    staged = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--name-only"], capture_output=True, text=True)
    assert staged.stdout.split() == ["a.txt"]  # approved: it ran, once
    assert approved[3] == 403 and "'vic' is a viewer, who may not act" in approved[4]["detail"]  # a viewer sees only
    assert approved[5] == 422  # a body naming another operator is refused: the account decides, not a typed name
    assert approved[1] == 409 and approved[2]["status"] == "approved" and approved[2]["operator"] == "dana"
    assert denied[1] == 409 and denied[2]["status"] == "denied"
    assert [(e["tool"], e["status"], e["operator"]) for e in ledger] == [("git_reset", "denied", "dana"),
                                                                         ("git_add", "approved", "dana")]  # fmt: skip
    shown = subprocess.run([sys.executable, "-m", "groundstate", "approvals", "list", "--all"], cwd=tmp_path,
                           capture_output=True, text=True, env={"GROUNDSTATE_HOME": str(tmp_path / "home")},
                           timeout=60)  # fmt: skip
    assert [line.count('"status": "approved"') for line in shown.stdout.splitlines()] == [0, 1]
