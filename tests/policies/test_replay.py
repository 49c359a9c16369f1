"""``groundstate policy replay``: calls the real MCP guard decided (over stdio, a real upstream) are re-decided under
a candidate policy from the facts recorded with them; the calls whose decision would flip are printed with the
candidate's derivation, and the summary counts them by reason. Provenance counts: a candidate that reads where a
value came from sees the recorded session's facts."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession

from ..guard.test_mcp_guard import TIME, guarded


def replay(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "groundstate", "policy", "replay", "--db",
                           f"sqlite:///{tmp_path / 'home' / 'groundstate.db'}", *arguments],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip


def record_calls(tmp_path: Path) -> None:
    request: Any = {"groundstate/request": "What time is it in Europe/London?"}  # the SDK's meta type names MCP's keys

    async def use(client: ClientSession) -> None:
        for zone in ("Asia/Tokyo", "Europe/London", "Asia/Tokyo"):
            await client.call_tool("time__get_current_time", {"timezone": zone}, meta=request)

    guarded(tmp_path, TIME, use)


def test_the_calls_a_candidate_would_decide_otherwise_are_named(tmp_path: Path) -> None:
    record_calls(tmp_path)
    (tmp_path / "candidate.mg").write_text(
        'mcp_denied(C, "only what the user asked about") :- mcp_call(C, _, _, _, _), '
        'flow_text_argument(C, "timezone"), !flow_argument_in_request(C, "timezone").\n')  # fmt: skip
    done = replay(tmp_path, "--policy", "candidate.mg")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    flips = [line for line in lines if line.startswith("entry ")]
    assert len(flips) == 2 and all("time/get_current_time: permit -> deny: only what the user asked about" in f
                                   for f in flips), done.stdout  # fmt: skip
    assert '!flow_argument_in_request("' in done.stdout and "[derived by the rule at candidate.mg:1]" in done.stdout
    assert "    was: time/get_current_time is read-only" in done.stdout
    assert "  2  permit -> deny: only what the user asked about" in lines
    assert lines[-1] == "3 decisions replayed, 2 would flip"
    as_json = json.loads(replay(tmp_path, "--policy", "candidate.mg", "--json").stdout)
    assert as_json["replayed"] == 3 and [f["entry"] for f in as_json["flips"]] == [1, 3]
    assert as_json["summary"] == [{"from": "permit", "to": "deny", "reason": "only what the user asked about",
                                   "calls": 2}]  # fmt: skip


def test_filters_and_what_cannot_be_redecided(tmp_path: Path) -> None:
    record_calls(tmp_path)
    (tmp_path / "same.mg").write_text("")
    assert replay(tmp_path, "--policy", "same.mg").stdout.splitlines()[-1] == "3 decisions replayed, 0 would flip"
    assert replay(tmp_path, "--policy", "same.mg", "--server", "git").stdout.splitlines()[-1] == \
        "0 decisions replayed, 0 would flip"  # fmt: skip
    assert replay(tmp_path, "--policy", "same.mg", "--since", "2999-01-01").stdout.splitlines()[-1] == \
        "0 decisions replayed, 0 would flip"  # fmt: skip
    with sqlite3.connect(tmp_path / "home" / "groundstate.db") as db:  # as an older guard left it, and a bad row
        db.execute("UPDATE mcp_decisions SET facts = NULL WHERE id = 1")
        db.execute("UPDATE mcp_decisions SET facts = '[[1' WHERE id = 2")
    done = replay(tmp_path, "--policy", "same.mg")
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert "1 decisions replayed, 0 would flip; 2 could not be re-decided" in done.stdout
    assert "  entry 1: recorded before groundstate kept a decision's facts" in done.stdout
    bad = replay(tmp_path, "--policy", "same.mg", "--since", "yesterday")
    assert bad.returncode == 2 and "not an ISO 8601 time" in bad.stderr


def test_a_candidate_that_does_not_parse_is_named_with_its_line(tmp_path: Path) -> None:
    record_calls(tmp_path)
    (tmp_path / "broken.mg").write_text("mcp_denied(C, R) :-\n")
    done = replay(tmp_path, "--policy", "broken.mg")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "broken.mg:" in done.stderr, done.stderr


def test_rows_edited_outside_groundstate_are_not_re_decided_and_said(tmp_path: Path) -> None:
    """Found by an attack helper: a ledger row whose facts are nested past any bound, whose time or reasons are not
    what groundstate writes — each is "could not be re-decided", never a traceback; the other rows replay."""
    record_calls(tmp_path)
    (tmp_path / "candidate.mg").write_text("# nothing added\n")
    with sqlite3.connect(tmp_path / "home" / "groundstate.db") as db:
        db.execute("UPDATE mcp_decisions SET facts = ? WHERE id = 1", ("[" * 200_000 + "]" * 200_000,))
        db.execute("UPDATE mcp_decisions SET at = 'garbage' WHERE id = 2")
        db.execute("UPDATE mcp_decisions SET reasons = '{' WHERE id = 3")
    done = replay(tmp_path, "--policy", "candidate.mg")
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "0 decisions replayed, 0 would flip; 3 could not be re-decided" in done.stdout, done.stdout
    assert "entry 1: the recorded facts cannot be read" in done.stdout and "entry 2: the row cannot be read" in \
        done.stdout  # fmt: skip
