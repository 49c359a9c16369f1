"""Workflow agents use MCP tools (``tools: [mcp:git/git_status, mcp:time/get_current_time]``) from the servers the
configuration names — real ones from PyPI — through the same path as every tool: the agent's kernel decides, the
journal records, the result comes back to the model. A workflow naming a server the configuration lacks is refused
at creation; a tool its server does not list fails the run at start, saying which."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from groundstate.config import load_config
from groundstate.runtime import TOOL_RESULT, EventStore, RunState, Runtime, WorkflowError, make_backend
from groundstate.store import ToolJournal

from .conftest import Script, envelope

FLOW = """
name: mcp-tools
agents:
  - id: writer_x
    instructions: report the repository's status
    tools: [mcp:git/git_status, mcp:time/get_current_time]
"""


def runtime_for(tmp_path: Path, url: str, repo: Path) -> Runtime:
    (tmp_path / "groundstate.toml").write_text(
        f'[mcp.servers.git]\ncommand = ["{sys.executable}", "-m", "mcp_server_git", "--repository", "{repo}"]\n'
        f'[mcp.servers.time]\ncommand = ["{sys.executable}", "-m", "mcp_server_time", "--local-timezone", "UTC"]\n'
    )
    settings = load_config(tmp_path / "groundstate.toml").config
    store = EventStore(f"sqlite:///{tmp_path / 'mcp.db'}")
    return Runtime(store, tmp_path / "home", backend=make_backend(f"openai-chat:scripted@{url}"), settings=settings)


def test_an_agent_calls_real_mcp_servers_through_the_audited_path(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "new.txt").write_text("x")
    script.by_round = True
    script.answers = {"writer_x": [envelope("checking", [
        {"tool": "git__git_status", "argument": json.dumps({"repo_path": str(repo)})},
        {"tool": "time__get_current_time", "argument": '{"timezone": "UTC"}'},
        {"tool": "git__git_reset", "argument": json.dumps({"repo_path": str(repo)})},  # not given to the agent
    ]), envelope("done [STATUS: SUCCESS]")]}  # fmt: skip
    runtime = runtime_for(tmp_path, url, repo)
    run_id = runtime.create(FLOW, "flow.yaml", "scripted")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    results = [e.payload for e in runtime.store.events(run_id) if e.type == TOOL_RESULT]
    assert [(r["tool"], r["decision"], r["status"]) for r in results] == [
        ("git__git_status", "/permit", "/success"), ("time__get_current_time", "/permit", "/success"),
        ("git__git_reset", "/deny", None)]  # fmt: skip
    assert "new.txt" in results[0]["output"] and '"timezone": "UTC"' in results[1]["output"]
    assert results[2]["reason"] == "unknown action type"  # a tool the workflow did not give is no action at all
    prompt = script.requests[0][1]["messages"][0]["content"]
    assert "- git__git_status: Shows the working tree status (MCP: git/git_status)" in prompt
    journaled = ToolJournal(runtime.store.url).entries(f"run:{run_id}/")
    assert [(e.tool, e.state) for e in journaled] == [("git__git_status", "done"), ("time__get_current_time", "done")]


def test_unknown_mcp_servers_and_tools_are_refused_with_the_reason(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, _ = model
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    runtime = runtime_for(tmp_path, url, tmp_path / "repo")
    with pytest.raises(WorkflowError, match=r"mcp:github/...: the configuration has no \[mcp.servers.github\]"):
        runtime.create(FLOW.replace("mcp:git/git_status", "mcp:github/list_issues"), "flow.yaml", "scripted")
    run_id = runtime.create(FLOW.replace("git_status", "git_push"), "flow.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "failed" and "no configured MCP server lists mcp:git/git_push" in (state.outcome or "")


def one_call(
    tmp_path: Path, model: tuple[str, Script], tool: str, arguments: dict[str, Any]
) -> tuple[Runtime, str, RunState]:
    """A run whose agent calls the git server's ``tool`` once (in a repository at tmp_path/repo, made first) and
    then answers; the runtime, the run and its state once driven."""
    url, script = model
    repo = tmp_path / "repo"
    script.by_round = True
    call = {"tool": f"git__{tool}", "argument": json.dumps({"repo_path": str(repo), **arguments})}
    script.answers = {"writer_x": [envelope(f"calling {tool}", [call]), envelope("done [STATUS: SUCCESS]")]}
    runtime = runtime_for(tmp_path, url, repo)
    run_id = runtime.create(FLOW.replace("mcp:git/git_status", f"mcp:git/{tool}"), "flow.yaml", "scripted")
    return runtime, run_id, asyncio.run(runtime.drive(run_id))


def test_a_writing_mcp_tool_waits_for_the_operator_like_in_the_guard(tmp_path: Path, model: tuple[str, Script]) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a")
    runtime, run_id, state = one_call(tmp_path, model, "git_add", {"files": ["a.txt"]})
    assert state.pause is not None and state.pause.category == "safety"
    assert state.pause.reason == ("The MCP tool git/git_add changes things (it is not read-only): an operator "
                                  "approves it first.")  # writes.mg's reason, as the guard gives it
    staged = ["git", "-C", str(repo), "diff", "--cached", "--name-only"]
    assert subprocess.run(staged, capture_output=True, text=True).stdout == ""  # held: nothing ran
    runtime.decide(run_id, "retry", actor="operator:olga")  # approves that exact call
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    assert subprocess.run(staged, capture_output=True, text=True).stdout.split() == ["a.txt"]


def test_a_destructive_mcp_tool_is_held_with_the_guards_reason(tmp_path: Path, model: tuple[str, Script]) -> None:
    """The runtime reads a tool's annotations as the guard does (destructiveHint unset on a writing tool: it may
    destroy data) and holds it by the same shared rule (writes.mg), with the same reason."""
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    _, _, state = one_call(tmp_path, model, "git_reset", {})
    assert state.pause is not None and state.pause.category == "safety"
    assert state.pause.reason == ("The MCP tool git/git_reset may destroy data (the server marks it destructive): an "
                                  "operator approves it first.")  # fmt: skip


def test_disabling_mcp_writes_lets_the_workflows_mcp_tools_run(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a")
    add = {"tool": "git__git_add", "argument": json.dumps({"repo_path": str(repo), "files": ["a.txt"]})}
    script.by_round = True
    script.answers = {"writer_x": [envelope("staging", [add]), envelope("done [STATUS: SUCCESS]")]}
    runtime = runtime_for(tmp_path, url, repo)
    runtime = Runtime(runtime.store, tmp_path / "home", backend=make_backend(f"openai-chat:scripted@{url}"),
                      settings=runtime.settings.model_copy(update={"policy": runtime.settings.policy.model_copy(
                          update={"disable_guards": ["mcp_writes"]})}))  # fmt: skip
    run_id = runtime.create(FLOW.replace("mcp:git/git_status", "mcp:git/git_add"), "flow.yaml", "scripted")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"  # no pause: the project trusts its tools
