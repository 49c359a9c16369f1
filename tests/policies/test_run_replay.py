"""``groundstate policy replay --run/--runs``: the checkpoints of runs the runtime drove (a scripted model on
loopback, real tools in the run's workspace) re-decided under a candidate's guard rules from what their guards were
told (runtime/reported.py); each checkpoint whose decision would flip is printed with the candidate's derivation.
Replayed under the rules the run was decided by, nothing flips: the record is whole."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from groundstate.config import Policy, ProjectConfig
from groundstate.runtime import EventStore, Runtime, make_backend

from ..runtime.conftest import Script, envelope
from ..runtime.test_guards import DANGER
from ..runtime.test_shadow_runs import DONE, EXPLOSIVE, FLOW, HOLDS_WRITES, WRITE


def runtime_at(tmp_path: Path, url: str, guards: str | None = None) -> Runtime:
    settings = ProjectConfig()
    if guards is not None:
        (tmp_path / "enforced.mg").write_text(guards)
        settings = ProjectConfig(policy=Policy(guards=[tmp_path / "enforced.mg"]))
    return Runtime(EventStore(f"sqlite:///{tmp_path / 'gs.db'}"), tmp_path / "home", settings=settings,
                   backend=make_backend(f"openai-chat:scripted@{url}"))  # fmt: skip


def replay(tmp_path: Path, candidate: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "candidate.mg").write_text(candidate)
    return subprocess.run([sys.executable, "-m", "groundstate", "policy", "replay", "--policy",
                           str(tmp_path / "candidate.mg"), "--db", f"sqlite:///{tmp_path / 'gs.db'}", *arguments],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip


def written_run(tmp_path: Path, model: tuple[str, Script], guards: str | None = None) -> str:
    url, script = model
    script.by_round = True
    script.answers = {"writer_a": [WRITE, DONE]}
    runtime = runtime_at(tmp_path, url, guards)
    run_id = runtime.create(FLOW, "shadowed.yaml", "scripted")
    asyncio.run(runtime.drive(run_id))
    return run_id


def test_a_checkpoint_the_candidate_would_hold_is_named_with_its_derivation(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    run_id = written_run(tmp_path, model)
    found = replay(tmp_path, HOLDS_WRITES, "--run", run_id)
    assert found.returncode == 0 and "Traceback" not in found.stderr, found.stdout + found.stderr
    lines = found.stdout.splitlines()
    assert lines[0].startswith(f"{run_id} writer_a tool_call (report ") and lines[0].endswith(
        "): go -> pause: safety: the candidate holds every write"), found.stdout  # fmt: skip
    assert "candidate.mg" in found.stdout and "tool_call(" in found.stdout  # the derivation, down to the call
    assert "    was: go" in found.stdout
    assert found.stdout.splitlines()[-1].endswith("checkpoints replayed, 2 would flip"), found.stdout  # + finished

    as_json = json.loads(replay(tmp_path, HOLDS_WRITES, "--runs", "--json").stdout)
    assert [(f["run"], f["checkpoint"], f["from"], f["to"]) for f in as_json["flips"]] == \
        [(run_id, "tool_call", "go", "pause"), (run_id, "finished", "go", "pause")]  # fmt: skip
    assert as_json["replayed"] >= 3 and as_json["unreadable"] == []


def test_a_pause_the_candidate_would_not_make_flips_to_go(tmp_path: Path, model: tuple[str, Script]) -> None:
    run_id = written_run(tmp_path, model, guards=HOLDS_WRITES)
    found = replay(tmp_path, "# without the rule\n", "--run", run_id, "--json")
    flips = json.loads(found.stdout)["flips"]
    assert [(f["checkpoint"], f["from"], f["recorded_reason"], f["to"]) for f in flips] == \
        [("tool_call", "pause", "safety: the candidate holds every write", "go")]  # fmt: skip


def test_under_its_own_rules_a_run_replays_without_a_flip(tmp_path: Path, model: tuple[str, Script]) -> None:
    """A run that paused on a dangerous call, was retried by the operator, ran the approved call and finished:
    every checkpoint of both drives re-decided under the shipped rules it ran under — nothing flips."""
    url, script = model
    script.by_round = True
    script.answers = {"coder_x": [envelope("Cleaning.", [{"tool": "delete_file", "argument": "keep.txt"}]),
                                  envelope("[BYPASS: nothing to compute] Done. [STATUS: SUCCESS]")]}  # fmt: skip
    runtime = runtime_at(tmp_path, url)
    run_id = runtime.create(DANGER, "danger.yaml", "scripted")
    workspace = runtime.home / "runs" / run_id / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "keep.txt").write_text("keep")
    assert asyncio.run(runtime.drive(run_id)).status == "awaiting_approval"
    runtime.decide(run_id, "retry", actor="operator:olga")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    found = json.loads(replay(tmp_path, "# the shipped rules alone\n", "--run", run_id, "--json").stdout)
    assert found["flips"] == [] and found["unreadable"] == [] and found["replayed"] >= 4


def test_a_run_without_reports_and_a_broken_report_are_said(tmp_path: Path, model: tuple[str, Script]) -> None:
    run_id = written_run(tmp_path, model)
    with sqlite3.connect(tmp_path / "gs.db") as db:
        db.execute("UPDATE guard_reports SET body = '{\"m\": \"tool_call\", \"a\": [1]}' WHERE id = "
                   "(SELECT max(id) FROM guard_reports WHERE body LIKE '%tool_call%')")  # fmt: skip
    broken = replay(tmp_path, HOLDS_WRITES, "--run", run_id)
    assert broken.returncode == 0 and "Traceback" not in broken.stderr
    assert f"  {run_id}: report " in broken.stdout and "cannot be re-decided" in broken.stdout, broken.stdout
    with sqlite3.connect(tmp_path / "gs.db") as db:
        db.execute("DELETE FROM guard_reports")
    older = replay(tmp_path, HOLDS_WRITES, "--run", run_id)
    assert "0 checkpoints replayed, 0 would flip; 1 runs could not be re-decided" in older.stdout, older.stdout
    assert "no guard reports recorded" in older.stdout
    unknown = replay(tmp_path, HOLDS_WRITES, "--run", "run-nobody")
    assert unknown.returncode == 2 and "run-nobody" in unknown.stderr and "Traceback" not in unknown.stderr
    mixed = replay(tmp_path, HOLDS_WRITES, "--run", run_id, "--server", "git")
    assert mixed.returncode == 2 and "--server" in mixed.stderr


def test_a_candidate_file_that_is_not_there_is_named_not_a_traceback(tmp_path: Path) -> None:
    for mode in (["--runs"], []):
        done = subprocess.run([sys.executable, "-m", "groundstate", "policy", "replay", "--policy",
                               str(tmp_path / "missing.mg"), "--db", f"sqlite:///{tmp_path / 'gs.db'}", *mode],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"{tmp_path / 'missing.mg'}: no such rule file" in done.stderr


def test_a_candidate_that_would_take_hours_is_cut_off(tmp_path: Path, model: tuple[str, Script]) -> None:
    run_id = written_run(tmp_path, model)
    started = time.monotonic()
    found = replay(tmp_path, EXPLOSIVE, "--run", run_id)
    assert found.returncode == 0 and time.monotonic() - started < 60, found.stdout + found.stderr
    assert "could not be re-decided" in found.stdout and "time limit of 5 s" in found.stdout, found.stdout


def test_an_unreadable_report_stops_its_run_only_and_a_run_id_leads_nowhere(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """Found by an attack helper: a report row that is not JSON stopped every run's replay; a run id edited into a
    path made replay create directories outside its scratch directory."""
    first, second = written_run(tmp_path, model), written_run(tmp_path, model)
    outside = tmp_path / "escaped"
    with sqlite3.connect(tmp_path / "gs.db") as db:
        db.execute("UPDATE guard_reports SET body = '{not json' WHERE id = (SELECT min(id) FROM guard_reports "
                   "WHERE run_id = ?)", (first,))  # fmt: skip
        db.execute("PRAGMA foreign_keys = OFF")
        for table, column in (("runs", "id"), ("events", "run_id"), ("guard_reports", "run_id")):
            db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (str(outside), second))
    found = json.loads(replay(tmp_path, HOLDS_WRITES, "--runs", "--json").stdout)
    assert [entry["run"] for entry in found["unreadable"]] == [first]
    assert "cannot be read" in found["unreadable"][0]["why"]
    assert [flip["run"] for flip in found["flips"]] == [str(outside), str(outside)]  # the other run replayed
    assert not outside.exists()


def test_a_lone_surrogate_in_what_the_guards_are_told_is_recorded_not_fatal(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """The model's answer is what its guards are told: a lone surrogate in it (valid JSON, ``\\ud800``) must be
    recorded like anything else — a report the database cannot take would fail the run's events with it."""
    url, script = model
    script.by_round = True
    script.answers = {"writer_a": [envelope("Half a pair: \ud800. [STATUS: SUCCESS]")]}
    runtime = runtime_at(tmp_path, url)
    run_id = runtime.create(FLOW, "shadowed.yaml", "scripted")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    found = json.loads(replay(tmp_path, "# the shipped rules alone\n", "--run", run_id, "--json").stdout)
    assert found["flips"] == [] and found["unreadable"] == [] and found["replayed"] >= 2


def test_a_run_whose_log_cannot_be_read_stops_its_replay_only(tmp_path: Path, model: tuple[str, Script]) -> None:
    """Found by an attack helper: one run's event that was not UTF-8 ended ``--runs`` (and ``--run``) with exit 2,
    replaying nothing of the runs that could be read."""
    damaged, intact = written_run(tmp_path, model), written_run(tmp_path, model)
    with sqlite3.connect(tmp_path / "gs.db") as db:
        db.execute("UPDATE events SET payload = CAST(x'7bff7d' AS TEXT) WHERE run_id = ? AND seq = 4", (damaged,))
    for chosen in (["--runs"], ["--run", damaged, "--run", intact]):
        done = replay(tmp_path, HOLDS_WRITES, *chosen, "--json")
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
        found = json.loads(done.stdout)
        assert [(entry["run"], entry["why"].split(": ", 1)[1][:24]) for entry in found["unreadable"]] == \
            [(damaged, "event 4 cannot be read: ")]  # fmt: skip
        assert {flip["run"] for flip in found["flips"]} == {intact}


def test_a_reason_holding_a_line_break_is_one_line_of_the_replay(tmp_path: Path, model: tuple[str, Script]) -> None:
    """A flip's reasons are printed one line each: a reason with a line break (a model's native call is named in
    one) printed a forged ``FLIP`` line and summary line of its own (found by an attack)."""
    run_id = written_run(tmp_path, model)
    forged = HOLDS_WRITES.replace("the candidate holds every write", "held\\n99 go -> go: nothing flips")
    found = replay(tmp_path, forged, "--run", run_id)
    assert found.returncode == 0, found.stdout + found.stderr
    assert "held\\u000a99 go -> go: nothing flips" in found.stdout, found.stdout
    assert not any(line.startswith("99 go") for line in found.stdout.splitlines()), found.stdout
