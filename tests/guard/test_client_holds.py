"""A held write approved after longer than the clients' own timeouts still runs, through real agent frameworks with
their defaults: the OpenAI Agents SDK gives up on an MCP request after 5 s (``client_session_timeout_seconds``), so
the guard answers "held: ask again" after ``mcp.hold_wait_sec`` (3 s); the model (scripted, on loopback: the one
test double) sends the same call again, and once an operator has approved — 6 s after the call was held — the
identical call runs, once. LangGraph's ``create_react_agent`` over ``langchain-mcp-adapters`` takes the same path."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from groundstate.guard import Ledger

from .test_attacks import SERVER
from .test_client_denials import AGENT, GRAPH, ScriptedModel, drive
from .test_client_snippets import clients_python  # noqa: F401 - the fixture: the clients' own environment


def approve_later(store: Path, after: float, approved: list[int]) -> None:
    """As an operator: approve the first held call ``after`` seconds after it was held."""
    for _ in range(1200):
        if store.exists():
            held = Ledger(f"sqlite:///{store}").waiting()
            if held:
                time.sleep(after)
                Ledger(f"sqlite:///{store}").decide(held[0].id, True, "dana")
                approved.append(held[0].id)
                return
        time.sleep(0.05)


@pytest.mark.parametrize("script", [AGENT, GRAPH], ids=["openai-agents", "langgraph-create-react-agent"])
def test_a_write_approved_after_the_clients_timeout_runs_once(
    script: str, clients_python: Path, tmp_path: Path  # noqa: F811
) -> None:
    effects = tmp_path / "effects.txt"
    (tmp_path / "hold.mg").write_text('mcp_needs_approval(C, "an operator decides") :- '
                                      'mcp_call(C, "lying", "append", _, _).\n')  # fmt: skip
    store = tmp_path / "guard.db"
    (tmp_path / "groundstate.toml").write_text(
        f'[mcp]\npolicy = ["{tmp_path / "hold.mg"}"]\n[mcp.servers.lying]\ncommand = ["{sys.executable}", '
        f'"{SERVER}"]\n[store]\nurl = "sqlite:///{store}"\n'
    )
    (tmp_path / "agent.py").write_text(script)
    ScriptedModel.tool, ScriptedModel.arguments, ScriptedModel.ask_again = "lying__append", {"path": str(effects)}, 8
    approved: list[int] = []
    operator = threading.Thread(target=approve_later, args=(store, 6.0, approved), daemon=True)
    operator.start()
    try:
        done = drive(clients_python, tmp_path)
    finally:
        ScriptedModel.tool, ScriptedModel.arguments, ScriptedModel.ask_again = "time__get_current_time", {
            "timezone": "Asia/Pyongyang"}, 0  # fmt: skip
    operator.join(30)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Timed out" not in done.stdout + done.stderr
    outputs = [m["content"] for m in ScriptedModel.seen[-1]["messages"] if m.get("role") == "tool"]
    assert len(outputs) >= 2 and "held: an operator decides" in str(outputs[0])  # told, asked again
    assert "appended" in str(outputs[-1]) and "FINAL: the tool answered:" in done.stdout
    assert effects.read_text() == "ran\n"  # once
    [entry] = [e for e in Ledger(f"sqlite:///{store}").entries() if e.id == approved[0]]
    assert (entry.status, entry.operator) == ("approved", "dana")
