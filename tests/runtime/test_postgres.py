"""The store on a real PostgreSQL server (started for the test in a temporary directory)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from groundstate.runtime import DecisionError, EventStore, Runtime, make_backend
from groundstate.store import AccountRefused, CallInDoubt, Operators, ToolJournal

from ..holders import gone
from .conftest import Script, envelope
from .test_run_memory import remember_and_recall

FLOW = """
name: pg
agents:
  - id: research_a
    instructions: Find it.
    tools: [web_search]
  - id: writer_b
    instructions: Write it.
    depends_on: [research_a]
"""


def test_runs_pauses_and_racing_decisions_on_postgres(postgres: str, tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"research_a": [envelope("From memory. [STATUS: SUCCESS]"),
                                     envelope("x", [{"tool": "web_search", "argument": "battery"}]),
                                     envelope("Found. [STATUS: SUCCESS]")],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    runtimes = [Runtime(EventStore(postgres), tmp_path, backend=make_backend(f"openai-chat:s@{url}")) for _ in range(2)]
    run_id = runtimes[0].create(FLOW, "pg.yaml", "scripted")
    state = asyncio.run(runtimes[0].drive(run_id))
    assert state.status == "awaiting_approval"
    outcomes: list[str] = []
    barrier = threading.Barrier(6)

    def decide(i: int) -> None:
        barrier.wait()
        try:
            runtimes[i % 2].decide(run_id, "retry")
            outcomes.append("applied")
        except DecisionError:
            outcomes.append("refused")

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["applied"] + ["refused"] * 5
    state = asyncio.run(runtimes[1].drive(run_id))
    assert state.status == "completed"
    fresh = EventStore(postgres)
    assert fresh.state(run_id).status == "completed" and any(r["id"] == run_id for r in fresh.runs())


def test_memory_persists_across_runs_on_postgres(postgres: str, tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    remember_and_recall(url, script, postgres, tmp_path / "home")


def test_operator_accounts_and_the_tool_journal_on_postgres(postgres: str) -> None:
    operators = Operators(postgres, first_admin_token="pg-first")
    admin = operators.authenticate("pg-first")
    assert admin is not None and admin.role == "admin"
    dana, token = operators.add("dana_pg", "viewer", admin)
    assert operators.authenticate(token) == dana
    with pytest.raises(AccountRefused, match="already an operator"):
        operators.add("dana_pg", "viewer", admin)
    operators.remove("dana_pg", admin)
    assert operators.authenticate(token) is None

    journal = ToolJournal(postgres)
    journal.holder = gone()  # its intents are those of a driver that died
    assert journal.begin("run:pg_%/a/1", 1, "write_file", {"target": "x"}) is None  # % and _ are not wildcards
    journal.finish("run:pg_%/a/1", 1, "write_file", {"target": "x"}, {"ok": True, "output": "done"})
    assert journal.begin("run:pg_%/a/1", 1, "write_file", {"target": "x"}) == {"ok": True, "output": "done"}
    assert journal.begin("run:pg_%/a/1", 2, "run_tests", {"target": ""}) is None
    assert journal.in_doubt("run:pgX") == [] and [e.tool for e in journal.in_doubt("run:pg_%/")] == ["run_tests"]
    assert journal.doubts("run:pg_%/", "run_tests", {"target": ""})
    with pytest.raises(CallInDoubt, match="never finished"):
        journal.begin("run:pg_%/a/1", 2, "run_tests", {"target": ""})
    assert journal.resolve("run:pg_%/a/", "operator:dana", "retry") == 1
    assert journal.begin("run:pg_%/a/1", 2, "run_tests", {"target": ""}) is None  # resolved: it may run again
