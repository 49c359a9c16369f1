"""Attacks by model output alone, replayed through the runtime against a scripted model on loopback.

Each test asserts the *effect* did not happen — no file outside the workspace created or changed, no process left
behind, no traceback, the run ends or pauses — and, after every run, the audit invariant: each executed action has
its ToolCall event, a permission decision with its reason, and its result.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from groundstate.runtime import (
    NODE_CREATED,
    RUN_COMPLETED,
    RUN_CREATED,
    RUN_FAILED,
    RUN_RESUMED,
    TOOL_CALL,
    TOOL_RESULT,
    AgentStarted,
    LeaseHeld,
    RunEnded,
    Runtime,
)

from .conftest import Script, envelope

WRITER = """
name: attack
agents:
  - id: writer_x
    instructions: do the task
    tools: [write_file, execute_python, read_file]
"""


def drive(runtime: Runtime, script: Script, answers: list[object], workflow: str = WRITER) -> tuple[str, str]:
    script.answers = {"writer_x": answers}
    run_id = runtime.create(workflow, "attack.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))
    assert_audited(runtime, run_id)
    return run_id, state.status


def assert_audited(runtime: Runtime, run_id: str) -> None:
    """Every executed action has its ToolCall, its decision with a reason, and its result — in that order."""
    events = runtime.store.events(run_id)
    calls = {e.seq: e for e in events if e.type == TOOL_CALL}
    results = [e for e in events if e.type == TOOL_RESULT]
    for result in results:
        call = calls.get(result.payload["call"])
        assert call is not None and call.seq < result.seq, f"a result without its ToolCall: {result}"
        assert result.payload["decision"] in ("/permit", "/deny") and result.payload["reason"]
        assert call.payload["tool"] == result.payload["tool"]
    executed = [r for r in results if r.payload["status"] is not None]
    assert all(r.payload["decision"] == "/permit" for r in executed)
    assert len(results) <= len(calls)


def tools_run(runtime: Runtime, run_id: str) -> list[tuple[str, str | None]]:
    return [(e.payload["tool"], e.payload["status"]) for e in runtime.store.events(run_id) if e.type == TOOL_RESULT]


def workspace(tmp_path: Path, run_id: str) -> Path:
    return tmp_path / "runs" / run_id / "workspace"


def test_mangle_updates_cannot_request_a_hidden_action(
    tmp_path: Path, runtime: Runtime, model: tuple[str, Script]
) -> None:
    marker = tmp_path / "hidden-ran"
    code = f"open({str(marker)!r}, 'w').write('sudo')"
    hidden = envelope("done [STATUS: SUCCESS]", mangle_updates=[
        f"requested_action(/r1, /execute_python, \"\", {json.dumps(code)})",
        "requested_action(/r2, /write_file, \"hidden.txt\", \"x\")",
    ])  # fmt: skip
    run_id, status = drive(runtime, model[1], [hidden])
    assert status == "completed"
    assert not marker.exists() and not (workspace(tmp_path, run_id) / "hidden.txt").exists()
    assert tools_run(runtime, run_id) == []  # nothing ran: there was no ToolCall


@pytest.mark.parametrize(
    "request_",
    [
        {"tool": "web search", "argument": "x"},
        {"tool": "read_file", "argument": 7},
        "read_file",
        {"tool": "read_file", "argument": "a", "extra": True},
    ],
)
def test_a_malformed_tool_request_is_a_pause_not_a_crash(
    runtime: Runtime, model: tuple[str, Script], request_: object
) -> None:
    run_id, status = drive(runtime, model[1], [envelope("x", [request_])])  # type: ignore[list-item]
    assert status == "awaiting_approval"
    pause = runtime.store.state(run_id).pause
    assert pause is not None and any("tool requests are malformed" in r for r in [pause.reason, *pause.others])


def test_a_target_of_300_characters_does_not_kill_the_driver(
    tmp_path: Path, runtime: Runtime, model: tuple[str, Script]
) -> None:
    long = "a" * 300
    answer = envelope("x", [{"tool": "read_file", "argument": long}, {"tool": "write_file", "argument": long,
                                                                       "content": "x"}])  # fmt: skip
    answer["control_packet"]["intent_classification"]["target"] = long
    run_id, status = drive(runtime, model[1], [answer, envelope("done [STATUS: SUCCESS]")])
    pause = runtime.store.state(run_id).pause
    assert status == "awaiting_approval" and pause is not None  # the driver lived to pause the run
    assert pause.reason == "The agent tried to write outside the run's workspace."  # the default safety pattern


def test_a_hard_link_does_not_reach_an_outside_file(
    tmp_path: Path, runtime: Runtime, model: tuple[str, Script]
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    run_id = runtime.create(WRITER, "attack.yaml", "scripted")
    work = workspace(tmp_path, run_id)
    work.mkdir(parents=True)
    os.link(outside, work / "linked.txt")
    answer = envelope("x", [{"tool": "read_file", "argument": "linked.txt"},
                            {"tool": "write_file", "argument": "linked.txt", "content": "overwritten"}])  # fmt: skip
    model[1].answers = {"writer_x": [answer, envelope("done [STATUS: SUCCESS]")]}
    asyncio.run(runtime.drive(run_id))
    assert_audited(runtime, run_id)
    results = [e.payload for e in runtime.store.events(run_id) if e.type == TOOL_RESULT]
    assert [r["status"] for r in results] == ["/failure", "/failure"]
    assert all("hard links" in r["output"] for r in results) and "secret" not in results[0]["output"]
    assert outside.read_text() == "secret"


def test_model_code_cannot_read_the_console_token_or_leave_a_process(
    tmp_path: Path, runtime: Runtime, model: tuple[str, Script]
) -> None:
    token = tmp_path / "console.token"  # the runtime's home is tmp_path
    token.write_text("TOKEN-123")
    pidfile = tmp_path / "pid"
    code = ("import os, subprocess, time\n"
            f"print(open({str(token)!r}).read())\n")  # fmt: skip
    daemon = ("import os, time\n"
              "if os.fork() == 0:\n    os.setsid()\n    time.sleep(2)\n    open('late.txt', 'w').write('alive')\n"
              "    time.sleep(600)\n"
              "print('parent done')\n")  # fmt: skip
    answer = envelope("x", [{"tool": "execute_python", "argument": code},
                            {"tool": "execute_python", "argument": daemon}])  # fmt: skip
    run_id, _ = drive(runtime, model[1], [answer, envelope("done [STATUS: SUCCESS]")])
    results = [e.payload for e in runtime.store.events(run_id) if e.type == TOOL_RESULT]
    assert results[0]["status"] == "/failure" and "TOKEN-123" not in results[0]["output"]
    assert "No such file" in results[0]["output"]
    assert results[1]["status"] == "/success"
    time.sleep(3)
    assert not (workspace(tmp_path, run_id) / "late.txt").exists()  # the forked child died with the program
    assert not pidfile.exists()


def test_a_second_driver_is_refused_and_nothing_follows_a_terminal_event(
    runtime: Runtime, model: tuple[str, Script]
) -> None:
    run_id, status = drive(runtime, model[1], [envelope("done [STATUS: SUCCESS]")])
    assert status == "completed"
    with pytest.raises(RunEnded, match="has ended"):
        runtime.store.append(run_id, AgentStarted(attempt=9), "writer_x")
    second = runtime.create(WRITER, "attack.yaml", "scripted")
    runtime.store.acquire_lease(second, "another-process", 60)
    with pytest.raises(LeaseHeld, match="is being driven by another-process"):
        asyncio.run(runtime.drive(second))
    assert [e.type for e in runtime.store.events(second)] == [RUN_CREATED, NODE_CREATED]


def test_a_corrupted_store_is_a_clear_error_naming_the_run_and_event(
    tmp_path: Path, runtime: Runtime, model: tuple[str, Script]
) -> None:
    run_id, _ = drive(runtime, model[1], [envelope("done [STATUS: SUCCESS]")])
    with runtime.store.engine.begin() as db:
        db.exec_driver_sql("DELETE FROM events WHERE run_id = ? AND seq = 3", (run_id,))
    db_url = runtime.store.url
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "cli-home")}
    shown = subprocess.run([sys.executable, "-m", "groundstate", "runs", "show", run_id, "--db", db_url],
                           capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert shown.returncode == 2 and "Traceback" not in shown.stderr + shown.stdout
    assert f"run {run_id}: event 3 is missing" in shown.stdout
    with runtime.store.engine.begin() as db:
        db.exec_driver_sql("UPDATE events SET payload = '[[[[' WHERE run_id = ? AND seq = 2", (run_id,))
    fresh = Runtime(type(runtime.store)(db_url), tmp_path)
    with pytest.raises(Exception, match=f"run {run_id}: event 2 .* cannot be read"):
        fresh.store.events(run_id)


def test_recordings_and_run_folders_are_private(tmp_path: Path, runtime: Runtime, model: tuple[str, Script]) -> None:
    run_id, _ = drive(runtime, model[1], [envelope("done [STATUS: SUCCESS]")])
    recordings = list((tmp_path / "runs" / run_id / "recordings").iterdir())
    assert recordings and all(stat.S_IMODE(r.stat().st_mode) == 0o600 for r in recordings)
    for folder in ("workspace", "recordings"):
        assert stat.S_IMODE((tmp_path / "runs" / run_id / folder).stat().st_mode) == 0o700


def test_a_driver_that_fails_marks_the_run_failed_and_resume_continues_it(
    tmp_path: Path, runtime: Runtime, model: tuple[str, Script]
) -> None:
    def broken(spec: str) -> object:
        raise RuntimeError("the backend exploded")

    model[1].answers = {"writer_x": [envelope("done [STATUS: SUCCESS]")]}
    run_id = runtime.create(WRITER, "attack.yaml", "scripted")
    crashing = Runtime(runtime.store, tmp_path, backend_factory=broken)  # type: ignore[arg-type]
    state = asyncio.run(crashing.drive(run_id))
    assert state.status == "failed" and "the backend exploded" in str(state.outcome)
    assert runtime.store.runs()[0]["status"] == "failed"  # never left "running" with nobody driving it
    assert asyncio.run(runtime.drive(run_id)).status == "failed"  # a plain drive does not revive it
    state = asyncio.run(runtime.drive(run_id, resume_failed=True))
    assert state.status == "completed"
    types = [e.type for e in runtime.store.events(run_id)]
    assert types.index(RUN_FAILED) < types.index(RUN_RESUMED) < types.index(RUN_COMPLETED)


def test_a_surrogate_pair_split_across_stream_events_does_not_fail_the_model_backend(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """Issue 31: a provider streaming token by token sends an emoji's JSON surrogate pair (``\\ud83d\\ude00``) as two
    events. The agent used to pause as a failed backend ("surrogates not allowed"); the run completes and the output
    holds the emoji."""
    url, script = model
    answer = json.dumps(envelope("smile \U0001f600 done [STATUS: SUCCESS]"), ensure_ascii=False)
    emoji = answer.index("\U0001f600")
    halves = [answer[:emoji] + "\ud83d", "\ude00" + answer[emoji + 1 :]]  # the pair cut in two, as a tokenizer may
    body = b"".join(b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": half}}]}).encode() + b"\n\n"
                    for half in halves) + \
        b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'  # fmt: skip
    script.answers = {"writer_x": [body]}
    (tmp_path / "flow.yaml").write_text(WRITER)
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")}
    env.pop("GROUNDSTATE_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "groundstate", "run", "flow.yaml", "--model", f"openai-chat:m@{url}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    run_id = done.stdout.split()[1]
    shown = subprocess.run([sys.executable, "-m", "groundstate", "runs", "show", run_id, "--json"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert json.loads(shown.stdout)["agents"]["writer_x"]["output"] == "smile \U0001f600 done [STATUS: SUCCESS]"


def _random_bytes_file(tmp_path: Path) -> tuple[str, str, str]:
    path = tmp_path / "junk.db"
    path.write_bytes(os.urandom(8192))
    return f"sqlite:///{path}", str(path), "not a SQLite database"


def _another_programs_database(tmp_path: Path) -> tuple[str, str, str]:
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:  # tables of groundstate's names, with another program's columns
        for table in ("events", "operators", "mcp_decisions"):
            db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, happened TEXT)")
    return f"sqlite:///{path}", str(path), "is not groundstate's"


def _unreachable_postgres(_: Path) -> tuple[str, str, str]:
    return "postgresql://127.0.0.1:1/x", "127.0.0.1:1/x", "cannot reach the database"


STORE_COMMANDS = [["runs", "list"], ["runs", "show", "run-x"], ["runs", "pauses"], ["approvals", "list"],
                  ["operators", "list"]]  # fmt: skip


@pytest.mark.parametrize("store", [_random_bytes_file, _another_programs_database, _unreachable_postgres],
                         ids=["random-bytes", "another-schema", "unreachable-postgres"])  # fmt: skip
@pytest.mark.parametrize("command", STORE_COMMANDS, ids=" ".join)
def test_a_store_that_is_not_a_groundstate_database_is_one_line_and_exit_2_not_a_traceback(
    tmp_path: Path, store: Any, command: list[str]
) -> None:
    """Issue 31 (came back after a refactor): ``--db`` naming a file of random bytes, another program's SQLite
    database, or a PostgreSQL server that does not answer printed a Python traceback. Now: one line naming the
    database and the problem, exit 2 (StoreError), and another program's database is left as it was."""
    url, named, problem = store(tmp_path)
    before = _schema(tmp_path / "other.db")
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "80"}
    env.pop("GROUNDSTATE_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "groundstate", *command, "--db", url], cwd=tmp_path, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    said = (done.stdout + done.stderr).strip()
    assert done.returncode == 2, said
    assert "Traceback" not in said and len(said.splitlines()) == 1, said
    assert said.startswith("error: ") and named in said and problem in said, said
    assert _schema(tmp_path / "other.db") == before  # nothing created in another program's database


def _schema(path: Path) -> list[tuple[str, str]] | None:
    import sqlite3

    if not path.exists():
        return None
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT name, sql FROM sqlite_master").fetchall())
