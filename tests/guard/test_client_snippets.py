"""The OpenAI Agents SDK and LangGraph snippets of docs/mcp.md, run as written against the guard.

Their MCP adapters require the 1.x `mcp` package and the guard runs on 2.x, so they cannot share one environment:
the snippets run in one of their own (``.venv-clients`` beside the checkout, built on first use with
`openai-agents` and `langchain-mcp-adapters` from the package index), with the `groundstate` command of this one."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..test_docs import blocks
from .test_mcp_guard import TIME

CLIENTS = Path(__file__).parents[2] / ".venv-clients"
PACKAGES = ["openai-agents", "langchain-mcp-adapters", "langgraph", "langchain-openai"]


@pytest.fixture(scope="module")
def clients_python() -> Path:
    """The Python of the clients' environment, built once (under a lock: test processes may race)."""
    python = CLIENTS / "bin" / "python"
    with open(CLIENTS.parent / ".venv-clients.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (CLIENTS / "ready").exists():
            subprocess.run([sys.executable, "-m", "venv", str(CLIENTS)], check=True)
            installed = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PACKAGES],
                                       capture_output=True, text=True, timeout=900)  # fmt: skip
            if installed.returncode != 0:
                pytest.fail(f"cannot install {PACKAGES} for the client snippets: {installed.stderr[-2000:]}")
            (CLIENTS / "ready").write_text("")
    return python


SNIPPETS = [code for lang, code in blocks("mcp.md") if lang == "py"]


@pytest.mark.parametrize("snippet", SNIPPETS, ids=["openai-agents", "langgraph"])
def test_the_docs_client_snippet_runs_through_the_guard(snippet: str, clients_python: Path, tmp_path: Path) -> None:
    # the clients start the guard with their own small environment (no GROUNDSTATE_HOME): the store is named here
    (tmp_path / "groundstate.toml").write_text(TIME + f'[store]\nurl = "sqlite:///{tmp_path / "guard.db"}"\n')
    (tmp_path / "snippet.py").write_text(snippet)
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "GROUNDSTATE_HOME": str(tmp_path / "home")}  # fmt: skip
    done = subprocess.run([str(clients_python), "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "time__get_current_time" in done.stdout and '"timezone": "UTC"' in done.stdout.replace("\\n", "\n")
