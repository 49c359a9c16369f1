"""The tool journal's statements, built once with bound parameters: a call's row is found by its exact scope,
position and digest; "in doubt" means an intent without a result under a scope prefix taken literally (an agent's
``_`` or a ``%`` in a scope is not a wildcard); a finished call is no longer in doubt and returns its result; a
call resumed after an operator resolved it is journaled again — in the caller's transaction when it gives one."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from groundstate.store import CallInDoubt, ToolJournal, call_digest, this_process

from ..holders import gone


def test_in_doubt_is_an_unfinished_intent_under_a_literal_prefix(tmp_path: Path) -> None:
    journal = ToolJournal(f"sqlite:///{tmp_path / 'j.db'}")
    journal.holder = gone()  # its intents are those of a process that died
    assert journal.begin("run:r1/research_a/1", 1, "web_search", {"q": "x"}) is None
    assert journal.doubts("run:r1/research_a/", "web_search", {"q": "x"})
    assert not journal.doubts("run:r1/research_a/", "web_search", {"q": "y"})  # another call
    journal.begin("run:r1/researchXb/1", 2, "web_search", {"q": "z"})
    assert not journal.doubts("run:r1/research_b/", "web_search", {"q": "z"})  # '_' is not a wildcard
    assert not journal.doubts("run:r%/", "web_search", {"q": "x"})  # nor is '%'
    journal.finish("run:r1/research_a/1", 1, "web_search", {"q": "x"}, {"ok": True, "output": "found"})
    assert not journal.doubts("run:r1/research_a/", "web_search", {"q": "x"})
    assert journal.begin("run:r1/research_a/1", 1, "web_search", {"q": "x"}) == {"ok": True, "output": "found"}


def test_a_resolved_call_is_journaled_again_in_the_callers_transaction(tmp_path: Path) -> None:
    journal = ToolJournal(f"sqlite:///{tmp_path / 'j.db'}")
    journal.holder = gone()
    journal.begin("mcp:git/", 7, "git_commit", {"message": "m"})
    with pytest.raises(CallInDoubt):
        journal.begin("mcp:git/", 7, "git_commit", {"message": "m"})
    assert journal.resolve("mcp:git/", "operator:ana", "approved", "git_commit", {"message": "m"}) == 1
    with journal.engine.begin() as db:
        assert journal.doubts("mcp:git/", "git_commit", {"message": "m"}, db=db) is False
        assert journal.begin("mcp:git/", 7, "git_commit", {"message": "m"}, db=db) is None
    assert journal.doubts("mcp:git/", "git_commit", {"message": "m"})  # running again: an intent once more


def test_an_unfinished_call_is_in_doubt_only_when_its_process_is_gone(tmp_path: Path) -> None:
    journal = ToolJournal(f"sqlite:///{tmp_path / 'j.db'}")
    host, pid, start = this_process().split(":")
    journal.begin("mcp:git/", 1, "git_status", {"repo": "r"})  # in flight in this (living) process
    assert not journal.doubts("mcp:git/", "git_status", {"repo": "r"})
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        sleeper_start = Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        holders = {
            2: f"{host}:{sleeper.pid}:{sleeper_start}",  # another process, still running: in flight
            3: f"{host}:{sleeper.pid}:{int(sleeper_start) + 1}",  # its process id, reused by another: gone
            4: f"{host}:{pid}",  # written before holders carried a start time: cannot tell, gone
            5: f"elsewhere:{pid}:{start}",  # another host: cannot tell, gone
        }
        with journal.engine.begin() as db:
            for position, holder in holders.items():
                row = (f"mcp:s{position}/", position, call_digest("t", {}), "t", "{}", holder)
                db.exec_driver_sql("INSERT INTO tool_journal (scope, position, digest, tool, arguments, state, holder, "
                                   "started_at) VALUES (?, ?, ?, ?, ?, 'intent', ?, '2026-11-24 00:00:00.000000')",
                                   row)  # fmt: skip
        assert [journal.doubts(f"mcp:s{p}/", "t", {}) for p in holders] == [False, True, True, True]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert journal.doubts("mcp:s2/", "t", {})  # its process ended without a result: now in doubt


def test_a_holder_that_exited_and_waits_to_be_reaped_is_gone(tmp_path: Path) -> None:
    """A guard killed while its parent (an editor) has not reaped it yet is a zombie: gone, so its call is in doubt."""
    journal = ToolJournal(f"sqlite:///{tmp_path / 'j.db'}")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    start = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    journal.holder = f"{this_process().split(':')[0]}:{process.pid}:{start}"
    journal.begin("mcp:git/", 1, "git_commit", {"message": "m"})
    assert not journal.doubts("mcp:git/", "git_commit", {"message": "m"})  # running: in flight
    process.kill()
    for _ in range(100):  # killed, not reaped: a zombie until wait()
        if Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.02)
    try:
        assert journal.doubts("mcp:git/", "git_commit", {"message": "m"})
    finally:
        process.wait()
