"""``groundstate config show`` names the line each key is set on, whatever TOML form sets it: a table's key, a
dotted key, a key of an inline table, a quoted key, an array of tables, a key after a multi-line array."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONFIG = '''policy.disable_guards = ["provenance"]
search = { backend = "corpus", timeout_sec = 5.0 }

[budgets]
max_tokens = 1000
"max_cost" = 2.5

[mcp]
history_calls = 50
[mcp.servers."time"]
command = [
  "python", "-m", "mcp_server_time",
  "x = y",
]
labels.get_current_time = ["private"]

[models]
fallback = ["openai-chat:gpt@https://api.example/v1"]
endpoints = ["https://one.example/v1"]

[limits.shard_profiles.main]
temperature = 0.2
'''
EXPECTED = {
    "policy.disable_guards": 1, "search.timeout_sec": 2, "models.fallback": 18, "budgets.max_tokens": 5,
    "budgets.max_cost": 6,
    "mcp.history_calls": 9, "mcp.servers.time.command": 11, "mcp.servers.time.labels.get_current_time": 15,
    "limits.shard_profiles.main.temperature": 22,
}  # fmt: skip


def test_every_key_is_named_at_its_own_line(tmp_path: Path) -> None:
    (tmp_path / "groundstate.toml").write_text(CONFIG)
    done = subprocess.run([sys.executable, "-m", "groundstate", "config", "show", "--config",
                           str(tmp_path / "groundstate.toml")], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    origins = {line.split(" = ", 1)[0]: line.rsplit("  # ", 1)[1] for line in done.stdout.splitlines()
               if " = " in line and not line.endswith("# default")}  # fmt: skip
    for key, number in EXPECTED.items():
        assert origins.get(key) == f"{tmp_path / 'groundstate.toml'}:{number}", (key, origins.get(key))


def test_an_error_in_an_inline_table_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "groundstate.toml").write_text(CONFIG.replace("timeout_sec = 5.0", 'timeout_sec = "slow"'))
    done = subprocess.run([sys.executable, "-m", "groundstate", "config", "check", "--config",
                           str(tmp_path / "groundstate.toml")], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{tmp_path / 'groundstate.toml'}:2: search.timeout_sec" in done.stderr, done.stderr
