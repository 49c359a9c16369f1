"""The pure core of driving a run (``runtime/progress.py``): what a driver writes when it takes a run up and when no
agent is running any more — from a run's state alone, built here by hand, no driver, model or store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from groundstate.runtime import Event, RunState, closing, opening

NOW = datetime.now(UTC)
WORKFLOW = "name: t\nagents:\n  - id: a\n    instructions: x\n  - id: b\n    instructions: y\n    depends_on: [a]\n"


def replayed(*events: tuple[str, str | None, dict[str, Any]]) -> RunState:
    """A run of agents ``a`` and ``b`` (b after a) with ``events`` after its creation."""
    log: list[tuple[str, str | None, dict[str, Any]]] = [
        ("RunCreated", None, {"workflow": WORKFLOW, "name": "t", "model": "m"}),
        ("NodeCreated", None, {"agent": "a"}), ("NodeCreated", None, {"agent": "b"}), *events]  # fmt: skip
    return RunState.replay("r1", [Event.parsed("r1", seq, kind, agent, payload, NOW, "runtime")
                                  for seq, (kind, agent, payload) in enumerate(log, 1)])  # fmt: skip


STARTED = ("RunStarted", None, {"driver": "d1"})


def done(agent: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    return [("AgentStarted", agent, {"attempt": 1}), ("AgentCompleted", agent, {"output": "ok", "status_tag": None})]


def test_a_pending_run_is_started_with_its_model_and_driver() -> None:
    started = opening(replayed(), "d2")
    assert (started.NAME, started.to_payload()) == ("RunStarted", {"model": "m", "driver": "d2"})


def test_a_run_taken_up_again_is_resumed_naming_the_agents_it_interrupted() -> None:
    state = replayed(STARTED, *done("a"), ("AgentStarted", "b", {"attempt": 1}))
    resumed = opening(state, "d2")
    assert (resumed.NAME, resumed.to_payload()) == ("RunResumed", {"restarted": ["b"], "driver": "d2"})
    assert opening(replayed(STARTED), "d2").to_payload() == {"restarted": [], "driver": "d2"}


def test_a_run_whose_agents_all_settled_completes_with_each_ending() -> None:
    state = replayed(STARTED, *done("a"), ("AgentSkipped", "b", {"by": "operator:dana"}))
    ending = closing(state, [])
    assert ending is not None and ending.NAME == "RunCompleted"
    assert ending.to_payload() == {"summary": {"a": "succeeded", "b": "skipped"}}  # no learned rules: left out
    counted = closing(state, [{"rule": 3, "remaining": 2}])
    assert counted is not None and counted.to_payload()["learned"] == [{"rule": 3, "remaining": 2}]


def test_a_run_with_an_agent_that_cannot_proceed_fails_naming_it() -> None:
    state = replayed(STARTED, ("AgentStarted", "a", {"attempt": 1}), ("AgentFailed", "a", {"error": "boom"}))
    ending = closing(state, [])
    assert ending is not None and ending.NAME == "RunFailed"
    assert ending.to_payload()["error"] == "agents that cannot proceed: a, b"


def test_a_run_no_longer_running_gets_no_ending() -> None:
    paused = replayed(STARTED, ("AgentStarted", "a", {"attempt": 1}),
                      ("ApprovalRequested", "a", {"category": "quality", "reason": "check"}))  # fmt: skip
    aborted = replayed(STARTED, ("RunAborted", None, {"reason": "stop", "by": "operator:dana"}))
    assert closing(paused, []) is None and closing(aborted, []) is None and closing(replayed(), []) is None
