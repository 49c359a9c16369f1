"""Learned rules in runs: a rule an operator proposes (in `kernel repl`) is loaded by every agent's kernel; while
quarantined it only records what it would derive, and its quarantine counts completed runs, not evaluations."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from groundstate.config import load_config
from groundstate.runtime import EventStore, Runtime

from .conftest import Script, envelope

RULE = ('Decl frozen(T) bound [/string].\nfrozen(T) :- pending_action(_, /write_file, T, _, _), '
        ':string:starts_with(T, "docs/").\ndenied(A, "writes to docs/ are frozen") :- '
        'pending_action(A, /write_file, T, _, _), frozen(T).')  # fmt: skip
FLOW = "name: docs\nagents:\n  - id: writer_a\n    instructions: Write the docs.\n    tools: [write_file]\n"


def test_quarantine_counts_completed_runs(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.by_round = True
    script.answers = {"writer_a": [envelope("Writing.", [{"tool": "write_file", "argument": "docs/a.md",
                                                         "content": "x"}]),
                                   envelope("Done. [STATUS: SUCCESS]")]}  # fmt: skip
    (tmp_path / "g.toml").write_text(f'[models]\ndefault = "openai-chat:m@{url}"\n'
                                     '[learned]\npath = "rules/learned.mg"\nquarantine_runs = 2\n')  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "GROUNDSTATE_CONFIG"} | {"GROUNDSTATE_HOME": str(tmp_path)}
    repl = subprocess.run([sys.executable, "-m", "groundstate", "kernel", "repl", "--workspace", str(tmp_path),
                           "--config", "g.toml"], input=f"learn {RULE.replace(chr(10), ' ')}\nquit\n", cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "accepted as learned rule 1, in quarantine for 2 runs" in repl.stdout, repl.stdout + repl.stderr
    settings = load_config(tmp_path / "g.toml").config
    decisions, remaining = [], []
    for number in range(3):
        runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'l.db'}"), tmp_path / f"home{number}", settings=settings)
        run_id = runtime.create(FLOW, "docs.yaml")
        state = asyncio.run(runtime.drive(run_id))
        assert state.status == "completed", state.pause
        decisions.append(state.nodes["writer_a"].tools[0]["decision"])
        remaining.append(runtime.store.events(run_id)[-1].payload["learned"][0]["remaining"])
    assert decisions == ["/permit", "/permit", "/deny"]  # acting only once two runs have completed
    assert remaining == [1, 0, 0]
    text = (tmp_path / "rules" / "learned.mg").read_text()
    assert re.search(r'# derived in quarantine: "denied\(/action/\d+, \\"writes to docs/ are frozen\\"\)"', text)
