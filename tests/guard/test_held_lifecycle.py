"""A held call has a living waiter or it is not held: a client that cancels the call (``notifications/cancelled``)
withdraws it, and so does the death of the guard that held it — either way an operator's decision on it is refused
naming why, and it is no longer offered for approval. A call held longer than ``mcp.hold_wait_sec`` is parked: its
client reads "held: ask again", and the identical call sent again learns the outcome — an approval runs it once.
Driven as a client would, over raw JSON-RPC on stdio."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundstate.config import default_db_url
from groundstate.guard import ApprovalRefused, Ledger

from .test_attacks import SERVER

HELLO: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]  # fmt: skip


def start_guard(tmp_path: Path, hold_wait: float = 60) -> subprocess.Popen[str]:
    (tmp_path / "hold.mg").write_text('mcp_needs_approval(C, "an operator decides") :- '
                                      'mcp_call(C, "lying", "append", _, _).\n')  # fmt: skip
    (tmp_path / "groundstate.toml").write_text(f'[mcp]\napproval_timeout_sec = 60\nhold_wait_sec = {hold_wait}\n'
                                               f'policy = ["hold.mg"]\n'
                                               f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n')
    guard = subprocess.Popen([sys.executable, "-m", "groundstate", "mcp", "serve"], cwd=tmp_path,
                             env={**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"),
                                  "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
    send(guard, *HELLO)
    return guard


def answers(guard: subprocess.Popen[str], number: int) -> Iterator[dict[str, Any]]:
    """The guard's messages up to and including its answer to request ``number``."""
    assert guard.stdout is not None
    for line in guard.stdout:
        message = json.loads(line)
        yield message
        if message.get("id") == number:
            return
    raise AssertionError(f"the guard stopped before answering request {number}")


def send(guard: subprocess.Popen[str], *messages: dict[str, Any]) -> None:
    assert guard.stdin is not None
    guard.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
    guard.stdin.flush()


def call(number: int, path: Path) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": number, "method": "tools/call",
            "params": {"name": "lying__append", "arguments": {"path": str(path), "note": f"call {number}"}}}


def same(number: int, path: Path) -> dict[str, Any]:
    """Request ``number``: the same call each time (tool and arguments)."""
    request = call(number, path)
    request["params"]["arguments"]["note"] = "the same call"
    return request


def ledger_of(tmp_path: Path) -> Ledger:
    """The guard's ledger, once the guard has created its store."""
    for _ in range(600):
        if (tmp_path / "home" / "groundstate.db").exists():
            return Ledger(default_db_url(tmp_path / "home"))
        time.sleep(0.05)
    raise AssertionError("the guard never created its store")


def until(ledger: Ledger, status: str, count: int = 1) -> list[Any]:
    for _ in range(600):
        found = [entry for entry in ledger.entries() if entry.status == status]
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {status} call in the ledger: {[(e.id, e.status) for e in ledger.entries()]}")


@contextlib.contextmanager
def holding(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Ledger, Any]]:
    """A guard holding one call (``lying__append``, id 2) for an operator; killed with its upstream at the end."""
    guard = start_guard(tmp_path)
    try:
        send(guard, call(2, tmp_path / "effects.txt"))
        ledger = ledger_of(tmp_path)
        [held] = until(ledger, "held")
        yield guard, ledger, held
    finally:
        os.killpg(guard.pid, signal.SIGKILL)  # the guard and its upstream, without a chance to clean up
        guard.wait(30)


def test_a_cancelled_held_call_is_withdrawn_and_cannot_be_approved(tmp_path: Path) -> None:
    with holding(tmp_path) as (guard, ledger, held):
        assert [entry.id for entry in ledger.waiting()] == [held.id]  # offered while someone waits
        send(guard, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        [withdrawn] = until(ledger, "withdrawn")
        assert withdrawn.id == held.id and withdrawn.ended == "its client cancelled the call or went away"
        with pytest.raises(ApprovalRefused, match=r"is withdrawn \(its client cancelled the call or went away\)"):
            ledger.decide(held.id, True, "dana")
        assert ledger.waiting() == [] and not (tmp_path / "effects.txt").exists()  # never offered again, nothing ran


def test_a_call_held_by_a_guard_that_died_is_withdrawn(tmp_path: Path) -> None:
    with holding(tmp_path) as (_, ledger, held):
        pass  # the guard is killed on the way out
    with pytest.raises(ApprovalRefused, match=r"is withdrawn \(the guard process that held it stopped\)"):
        ledger.decide(held.id, True, "dana")
    assert ledger.waiting() == [] and not (tmp_path / "effects.txt").exists()
    [entry] = ledger.entries()
    assert (entry.status, entry.operator) == ("withdrawn", None)  # approved by nobody: nothing pretends it ran


def test_a_call_held_past_the_guards_patience_is_parked_and_an_approval_runs_it_once(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    guard = start_guard(tmp_path, hold_wait=2.5)
    try:
        first = same(2, effects)
        first["params"]["_meta"] = {"progressToken": "p2"}
        started = time.monotonic()
        send(guard, first)
        *notes, held = answers(guard, 2)
        assert 2.5 <= time.monotonic() - started < 30
        progress = [note["params"] for note in notes if note.get("method") == "notifications/progress"]
        assert progress and progress[0]["progressToken"] == "p2" and "held for an operator's approval" in str(progress)
        assert held["result"]["isError"] is True and not effects.exists()  # nothing ran
        text = held["result"]["content"][0]["text"]
        assert text.startswith("held: an operator decides. Nothing ran") and "Send the same call again" in text
        decision = held["result"]["_meta"]["groundstate/decision"]
        assert (decision["decision"], decision["ask_again"]) == ("held", True)
        ledger = ledger_of(tmp_path)
        [parked] = ledger.waiting()  # still offered to an operator, and nobody's death withdraws it
        assert (parked.id, parked.status, parked.waiter) == (decision["entry"], "held", None)

        send(guard, same(3, effects))  # asked again before anyone decided: the same hold, still held
        *_, again = answers(guard, 3)
        assert again["result"]["_meta"]["groundstate/decision"]["entry"] == parked.id and not effects.exists()
        ledger.decide(parked.id, True, "dana")
        send(guard, same(4, effects))  # the identical call, after the approval: it runs
        *_, ran = answers(guard, 4)
        assert ran["result"]["content"][0]["text"] == "appended" and effects.read_text() == "ran\n"
        send(guard, same(5, effects))  # the approval is spent: the next identical call is a new hold
        *_, anew = answers(guard, 5)
        assert anew["result"]["_meta"]["groundstate/decision"]["entry"] != parked.id
        assert effects.read_text() == "ran\n" and [e.status for e in ledger.entries()][:2] == ["held", "approved"]
    finally:
        os.killpg(guard.pid, signal.SIGKILL)
        guard.wait(30)


def test_a_parked_call_outlives_its_guard_and_its_denial_is_read_once(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    guard = start_guard(tmp_path, hold_wait=0.5)
    try:
        send(guard, same(2, effects))
        *_, held = answers(guard, 2)
        entry = held["result"]["_meta"]["groundstate/decision"]["entry"]
    finally:
        os.killpg(guard.pid, signal.SIGKILL)  # the guard dies with the call parked: it stays held
        guard.wait(30)
    ledger = ledger_of(tmp_path)
    assert [e.id for e in ledger.waiting()] == [entry]
    ledger.decide(entry, False, "dana")
    guard = start_guard(tmp_path, hold_wait=0.5)
    try:
        send(guard, same(2, effects))
        *_, denied = answers(guard, 2)
        assert "denied: the operator dana denied the call" in denied["result"]["content"][0]["text"]
        assert denied["result"]["_meta"]["groundstate/decision"]["by"] == "operator:dana"
        send(guard, same(3, effects))
        *_, anew = answers(guard, 3)
        assert anew["result"]["content"][0]["text"].startswith("held: ")  # the denial was read: a new hold
    finally:
        os.killpg(guard.pid, signal.SIGKILL)
        guard.wait(30)
    assert not effects.exists()


def test_a_decision_on_a_call_the_ledger_does_not_have_names_it_exit_2(tmp_path: Path) -> None:
    """An unknown call is a name to fix (exit 2; the console's 404), not another process's hold (exit 4, a 409)."""
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "groundstate", "approvals", "approve", "12345"], cwd=tmp_path,
                          env={**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")}, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "there is no call 12345 in the guard's ledger" in done.stderr and "Traceback" not in done.stderr


# -- found by an attack on the store's chain: each stays a test --------------------------------------------------------
def test_an_approval_written_into_the_ledger_by_hand_runs_nothing(tmp_path: Path) -> None:
    """Someone who can write the database marks a held call approved, as no operator did: the guard waiting on it
    refuses it naming the changed row, and nothing runs; ``audit verify`` names the row too."""
    with holding(tmp_path) as (guard, _, held):
        with sqlite3.connect(tmp_path / "home" / "groundstate.db") as db:
            db.execute("UPDATE mcp_decisions SET status = 'approved', operator = 'dana' WHERE id = ?", (held.id,))
        [*_, answer] = answers(guard, 2)
    assert answer["result"]["isError"] is True, answer
    text = answer["result"]["content"][0]["text"]
    assert text.startswith(f"denied: call {held.id} is not run: the ledger's mcp_decisions row [{held.id}] was "
                           "changed outside groundstate"), text  # fmt: skip
    assert not (tmp_path / "effects.txt").exists()


def test_an_operator_cannot_approve_a_held_call_whose_row_was_edited(tmp_path: Path) -> None:
    """The arguments an operator is shown were edited to look harmless; approving is refused (exit 2), and the call
    the guard holds does not run."""
    with holding(tmp_path) as (_, ledger, held):
        with sqlite3.connect(tmp_path / "home" / "groundstate.db") as db:
            db.execute("UPDATE mcp_decisions SET arguments = ? WHERE id = ?",
                       (json.dumps({"path": "/tmp/harmless", "note": "read only"}), held.id))  # fmt: skip
        approved = subprocess.run([sys.executable, "-m", "groundstate", "approvals", "approve", str(held.id)],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=60,
                                  env={**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"),
                                       "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")})  # fmt: skip
        assert approved.returncode == 2, approved.stdout + approved.stderr
        said = " ".join((approved.stdout + approved.stderr).split())
        assert f"call {held.id} is not decided: the ledger's mcp_decisions row [{held.id}] was changed" in said
        assert "Traceback" not in approved.stderr
        assert [entry.status for entry in ledger.entries()] == ["held"]
    assert not (tmp_path / "effects.txt").exists()
