"""Pauses are first-class: two agents that pause together are both open, each with its own id, agent, reason,
derivation and age; a decision names the pause it answers, and one for a pause that is no longer open is refused
saying how it was decided. The CLI lists them (`runs pauses`) and decides each (`runs decide --pause`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from groundstate.runtime import DecisionError, Runtime, attempts_of

from .conftest import Script, envelope
from .test_cli_decisions import groundstate

TWO_WRITERS = """
name: two-writers
agents:
  - id: writer_a
    instructions: Write part A.
  - id: writer_b
    instructions: Write part B.
"""
NULL = envelope("Nothing to write. [STATUS: NULL]")
DONE = envelope("Written. [STATUS: SUCCESS]")


def paused_together(runtime: Runtime, script: Script) -> str:
    script.answers = {"writer_a": [NULL, DONE], "writer_b": [NULL, DONE]}
    run_id = runtime.create(TWO_WRITERS)
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "awaiting_approval"
    return run_id


def test_both_pauses_are_open_each_with_its_own_id(runtime: Runtime, model: tuple[str, Script]) -> None:
    run_id = paused_together(runtime, model[1])
    state = runtime.store.state(run_id)
    assert sorted(str(p.agent) for p in state.pauses) == ["writer_a", "writer_b"]
    assert len({p.id for p in state.pauses}) == 2
    for pause in state.pauses:
        assert pause.reason.startswith(f"Semantic null: agent '{pause.agent}'")
        assert pause.at is not None and pause.why is not None and "status_tag(" in json.dumps(pause.why)
    with pytest.raises(DecisionError, match=r"has 2 open pauses .*; name the one you decide"):
        runtime.decide(run_id, "skip")  # no "whichever is current"


def test_each_pause_is_decided_on_its_own_and_a_stale_decision_is_refused(
    runtime: Runtime, model: tuple[str, Script]
) -> None:
    run_id = paused_together(runtime, model[1])
    first, second = runtime.store.state(run_id).pauses
    state = runtime.decide(run_id, "skip", actor="operator:dana", pause=second.id)
    assert [p.id for p in state.pauses] == [first.id]  # the other one is still open, untouched
    assert state.nodes[second.agent or ""].status == "skipped" and state.nodes[first.agent or ""].status == "paused"
    with pytest.raises(DecisionError, match=rf"pause {second.id} of run {run_id} is no longer open: skip by "
                                            r"operator:dana at \d{4}-"):  # fmt: skip
        runtime.decide(run_id, "retry", pause=second.id)
    with pytest.raises(DecisionError, match=rf"has no open pause 9999 \(open: {first.id} for {first.agent}\)"):
        runtime.decide(run_id, "retry", pause=9999)
    state = runtime.decide(run_id, "retry", pause=first.id)
    assert state.status == "running"
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    events = runtime.store.events(run_id)
    assert [e.payload["pause"] for e in events if e.type == "ApprovalDecided"] == [second.id, first.id]


def test_an_abort_closes_the_other_pauses(runtime: Runtime, model: tuple[str, Script]) -> None:
    run_id = paused_together(runtime, model[1])
    first, second = runtime.store.state(run_id).pauses
    runtime.decide(run_id, "abort", actor="operator:dana", pause=first.id)
    with pytest.raises(DecisionError, match=f"pause {second.id} .* closed when the run was aborted by operator:dana"):
        runtime.decide(run_id, "skip", pause=second.id)


def test_each_attempt_keeps_its_own_output_and_the_pause_that_ended_it(
    runtime: Runtime, model: tuple[str, Script]
) -> None:
    run_id = paused_together(runtime, model[1])
    for pause in runtime.store.state(run_id).pauses:
        runtime.decide(run_id, "retry", actor="operator:dana", pause=pause.id)
    asyncio.run(runtime.drive(run_id))
    [first, second] = attempts_of(runtime.store.events(run_id))["writer_a"]
    assert (first.number, first.status, second.number, second.status) == (1, "paused", 2, "succeeded")
    assert first.output.startswith("Nothing to write.") and second.output.startswith("Written.")
    assert first.pause is not None and first.pause["reason"].startswith("Semantic null")
    assert first.decision == "retry by operator:dana" and second.pause is None


def test_the_cli_lists_every_open_pause_and_decides_each_by_id(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [NULL, DONE], "writer_b": [NULL, DONE]}
    (tmp_path / "flow.yaml").write_text(TWO_WRITERS)
    ran = groundstate(tmp_path, "run", "flow.yaml", "--model", f"openai-chat:m@{url}")
    assert ran.returncode == 3, ran.stdout + ran.stderr
    run_id = ran.stdout.split()[1]
    assert ran.stdout.count("QUALITY PAUSE") == 2  # both cards, not one
    listed = [json.loads(line) for line in groundstate(tmp_path, "runs", "pauses", "--json").stdout.splitlines()]
    assert sorted(p["agent"] for p in listed) == ["writer_a", "writer_b"] and {p["run_id"] for p in listed} == {run_id}
    assert all(p["age_seconds"] >= 0 and p["why"] for p in listed)
    text = groundstate(tmp_path, "runs", "pauses").stdout
    assert f"{run_id}  pause {listed[0]['pause']}  writer_" in text

    assert f"(+1 more open: groundstate runs pauses {run_id})" in groundstate(tmp_path, "runs", "list").stdout

    ambiguous = groundstate(tmp_path, "runs", "decide", run_id, "skip")
    assert ambiguous.returncode == 1 and "has 2 open pauses" in ambiguous.stdout
    one = groundstate(tmp_path, "runs", "decide", run_id, "skip", "--pause", str(listed[0]["pause"]))
    assert one.returncode == 0 and f"skip recorded for pause {listed[0]['pause']}" in one.stdout
    stale = groundstate(tmp_path, "runs", "decide", run_id, "retry", "--pause", str(listed[0]["pause"]))
    assert stale.returncode == 1 and "is no longer open: skip by operator:admin" in stale.stdout
    shown = json.loads(groundstate(tmp_path, "runs", "show", run_id, "--json").stdout)
    assert [p["pause"] for p in shown["pauses"]] == [listed[1]["pause"]]
    listed_runs = groundstate(tmp_path, "runs", "list").stdout
    assert f"paused at {listed[1]['agent']}" in listed_runs
