"""``groundstate demo``: the bundled workflow on the local model, the console beside it, non-interactive here; its
link is printed whole into a pipe, whatever the width."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from groundstate.config import default_db_url
from groundstate.runtime import EventStore


def test_demo_runs_offline_pauses_and_completes_with_decide(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    instructions = tmp_path / "fix.txt"
    instructions.write_text("Use web_search to find the 2025 market size for home battery storage.")
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"}
    env.pop("COLUMNS", None)  # a pipe: rich lays out 80 columns, narrower than the link
    done = subprocess.run([sys.executable, "-m", "groundstate", "demo", "--port", str(port), "--decide", "retry",
                           "--instructions", str(instructions)], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    link = re.search(rf"console: (http://127\.0\.0\.1:{port}/login\?token=\S+&next=/runs/(run-\S+))$", done.stdout,
                     re.MULTILINE)  # fmt: skip
    assert link, done.stdout  # printed whole on one line, never wrapped
    assert "a console token was created" in done.stdout
    assert "QUALITY PAUSE" in done.stdout and "Protocol violation: agent 'research_market'" in done.stdout
    assert f"run {link.group(2)}: completed" in done.stdout
    events = EventStore(default_db_url(tmp_path / "home")).events(link.group(2))
    assert [e.actor for e in events if e.type == "ApprovalDecided"] == ["operator:admin"]  # the console.token's account
