"""What the command line prints is shown, never obeyed: text from a model, a tool, a workflow or a store someone
else can write reaches the terminal with every character a terminal acts on (escape sequences, carriage returns,
bells, DEL, C1 controls, bidirectional overrides, invisible characters) written as its ``\\uXXXX`` escape — in
tables and cards, plain lines, error lines, and JSON (which stays JSON, and reads back the original text). Found by
attacks on the CLI's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from groundstate.runtime import (
    AgentCompleted,
    AgentFailed,
    AgentStarted,
    ApprovalRequested,
    EventStore,
    NodeCreated,
    RunStarted,
)

HOSTILE = "\x1b[2J\x1b]0;PWNED\x07\rOVR\x9b31m\u202eRLO\u200bZW\x7fDEL\u2028LS\x85NEL"
ACTED_ON = ["\x1b", "\x07", "\r", "\x9b", "\u202e", "\u200b", "\x7f", "\u2028", "\x85"]
ESCAPED = "\\u001b[2J\\u001b]0;PWNED\\u0007\\u000dOVR\\u009b31m\\u202eRLO\\u200bZW\\u007fDEL\\u2028LS\\u0085NEL"
FLOW = "name: w{h}\nagents:\n  - id: writer_a\n    instructions: write\n  - id: writer_b\n    instructions: check\n"


def groundstate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "400"}
    env.pop("GROUNDSTATE_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "groundstate", *args], cwd=tmp_path, env=env, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip


def shown(done: subprocess.CompletedProcess[bytes]) -> str:
    """What the command printed, checked to hold no character a terminal acts on."""
    text = (done.stdout + done.stderr).decode("utf-8")
    assert not [ch for ch in ACTED_ON if ch in text], text
    assert "Traceback" not in text, text
    return text


def hostile_run(tmp_path: Path) -> tuple[str, str]:
    """A run whose name, id, agent output, tool and pause carry the hostile text: (its database URL, its id)."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = EventStore(url)
    run_id = "run-" + HOSTILE
    store.create_run("w" + HOSTILE, FLOW.replace("{h}", json.dumps(HOSTILE)[1:-1]), None, run_id=run_id)
    for agent in ("writer_a", "writer_b"):
        store.append(run_id, NodeCreated(agent=agent))
    store.append(run_id, RunStarted(model=None, driver="me"))
    store.append(run_id, AgentStarted(attempt=1, backend="scripted"), "writer_b")
    store.append(run_id, AgentCompleted(output="report " + HOSTILE, status_tag=None), "writer_b")
    store.append(run_id, AgentStarted(attempt=1, backend="scripted"), "writer_a")
    store.append(run_id, ApprovalRequested(category="quality", reason="why " + HOSTILE, hint="hint " + HOSTILE),
                 "writer_a")  # fmt: skip
    return url, run_id


def test_runs_show_draws_tables_and_cards_with_the_text_escaped(tmp_path: Path) -> None:
    url, _ = hostile_run(tmp_path)
    listed = shown(groundstate(tmp_path, "runs", "list", "--db", url))
    run_id = listed.split("  ", 1)[0]
    assert run_id == "run-" + ESCAPED
    text = shown(groundstate(tmp_path, "runs", "show", "run-" + HOSTILE, "--db", url))
    # Rich drops a bell and a carriage return from what it draws; every other character is escaped — on the card's
    # lines, each one line, those two are escaped as well (as a line break is: it forged card lines)
    drawn = ESCAPED.replace("\\u0007", "").replace("\\u000d", "")
    assert f"report {drawn}" in text and f"why {ESCAPED}" in text and f"hint {ESCAPED}" in text, text
    assert "QUALITY PAUSE 8 of run-\\u001b[2J" in text  # the card's title, the run's id in it


def test_json_stays_json_and_reads_back_the_original_text(tmp_path: Path) -> None:
    url, run_id = hostile_run(tmp_path)
    for arguments in (("runs", "show", run_id, "--json"), ("runs", "pauses", "--json")):
        printed = shown(groundstate(tmp_path, *arguments, "--db", url))
        parsed = json.loads(printed.splitlines()[0])
        assert parsed["run_id"] == run_id, arguments


def test_a_pause_reason_cannot_forge_a_line_of_the_listing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = EventStore(url)
    run_id = store.create_run("w", FLOW.replace("{h}", ""), None)
    store.append(run_id, NodeCreated(agent="writer_a"))
    store.append(run_id, RunStarted(model=None, driver="me"))
    store.append(run_id, AgentStarted(attempt=1, backend="scripted"), "writer_a")
    forged = "ok\nreal-run  pause 1  writer_a  safety  waiting 0 s  all clear: groundstate runs decide evil skip"
    store.append(run_id, ApprovalRequested(category="quality", reason=forged), "writer_a")
    printed = shown(groundstate(tmp_path, "runs", "pauses", "--db", url))
    assert printed.count("\n") == 1 and "ok\\u000areal-run" in printed, printed


def test_error_lines_are_escaped_wherever_they_are_printed(tmp_path: Path) -> None:
    url, _ = hostile_run(tmp_path)
    unknown = groundstate(tmp_path, "runs", "show", "nope" + HOSTILE, "--db", url)  # the runtime's own handler
    assert unknown.returncode == 2 and f"nope{ESCAPED}" in shown(unknown)
    (tmp_path / "candidate.mg").write_text("# nothing\n")
    replayed = groundstate(tmp_path, "policy", "replay", "--policy", str(tmp_path / "candidate.mg"), "--run",
                           "nope" + HOSTILE, "--db", url)  # fmt: skip
    # click drops a CSI sequence (ESC [ ... letter) when its output is no terminal; the rest is escaped
    assert replayed.returncode == 2 and "nope\\u001b]0;PWNED\\u0007" in shown(replayed)
    (tmp_path / "bad.yaml").write_text(f"name: x\nagents:\n  - id: b{json.dumps(HOSTILE)[1:-1]}\n")
    refused = groundstate(tmp_path, "run", "bad.yaml", "--db", url)
    assert refused.returncode != 0 and "\\u001b" in shown(refused)


def test_an_agents_error_is_one_line_of_runs_show(tmp_path: Path) -> None:
    """A provider's error text is the agent's error, which ``runs show`` prints: with line breaks in it, it printed
    a forged block of another agent and a forged "completed" line of the run (found by an attack). It is one line."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = EventStore(url)
    run_id = store.create_run("w", FLOW.replace("{h}", ""), None)
    for agent in ("writer_a", "writer_b"):
        store.append(run_id, NodeCreated(agent=agent))
    store.append(run_id, RunStarted(model=None, driver="me"))
    store.append(run_id, AgentStarted(attempt=1, backend="scripted"), "writer_a")
    forged = "the model failed: hiccup\n\nwriter_b (succeeded, attempt 1):\nAll checks passed.\nrun x: completed"
    store.append(run_id, AgentFailed(error=forged), "writer_a")
    printed = shown(groundstate(tmp_path, "runs", "show", run_id, "--db", url))
    assert "error: the model failed: hiccup\\u000a\\u000awriter_b (succeeded, attempt 1):\\u000aAll checks" in printed
    assert not any(line.startswith(("writer_b (succeeded", "All checks", "run x:")) for line in printed.splitlines())
