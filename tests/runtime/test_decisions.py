"""The pure core of an operator's decision (``runtime/decisions.py``): which pause it answers, whether the account
may decide it, and the events that record it — from a run's state alone, no driver, model or store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from groundstate.runtime import (
    DecisionConflict,
    DecisionError,
    Event,
    EventBody,
    RunState,
    decision_events,
    repin_events,
)

NOW = datetime.now(UTC)
WORKFLOW = "name: t\nagents:\n  - id: a\n    instructions: x\n  - id: b\n    instructions: y\n"


def paused(*agents: str, created_by: str = "operator:sam") -> RunState:
    """A run whose ``agents`` each wait on a pause (seq numbers 5, 7, … in order)."""
    events: list[tuple[str, str | None, dict[str, Any]]] = [
        ("RunCreated", None, {"workflow": WORKFLOW, "name": "t", "model": None}), ("RunStarted", None, {})]
    events += [("NodeCreated", None, {"agent": agent}) for agent in ("a", "b")]
    for agent in agents:
        events += [("AgentStarted", agent, {"attempt": 1}),
                   ("ApprovalRequested", agent, {"category": "quality", "reason": f"check {agent}"})]  # fmt: skip
    log = [Event.parsed("r1", seq, kind, agent, payload, NOW, created_by if seq == 1 else "runtime")
           for seq, (kind, agent, payload) in enumerate(events, 1)]  # fmt: skip
    return RunState.replay("r1", log)


def said(planned: list[tuple[EventBody, str | None]]) -> list[tuple[str, str | None, dict[str, Any]]]:
    """The planned events as the log stores them: type, agent, payload."""
    return [(body.NAME, agent, body.to_payload()) for body, agent in planned]


def test_a_retry_records_the_decision_and_its_instructions() -> None:
    [(kind, agent, payload)] = said(decision_events(paused("a"), "retry", "look again", "operator:dana", None, []))
    assert (kind, agent) == ("ApprovalDecided", "a")
    assert payload == {"decision": "retry", "pause": 6, "reason": "check a", "instructions": "look again"}


def test_skip_and_abort_record_what_they_mean() -> None:
    skipped = said(decision_events(paused("a"), "skip", "ignored", "operator:dana", 6, []))
    assert [(k, a) for k, a, _ in skipped] == [("ApprovalDecided", "a"), ("AgentSkipped", "a")]
    assert "instructions" not in skipped[0][2] and skipped[1][2] == {"by": "operator:dana"}
    aborted = said(decision_events(paused("a"), "abort", None, "operator:dana", 6, []))
    assert aborted[1] == ("RunAborted", "a", {"reason": "aborted by operator:dana"})


def test_which_pause_is_answered() -> None:
    both = paused("a", "b")
    with pytest.raises(DecisionError, match=r"has 2 open pauses .*open: 6 for a, 8 for b.*; name the one") as several:
        decision_events(both, "retry", None, "operator:dana", None, [])
    assert not isinstance(several.value, DecisionConflict)  # bad input (400), not a conflict with the state
    assert decision_events(both, "retry", None, "operator:dana", 8, [])[0][1] == "b"
    with pytest.raises(DecisionConflict, match="has no open pause 9"):
        decision_events(both, "retry", None, "operator:dana", 9, [])
    with pytest.raises(DecisionError, match="unknown decision 'maybe'"):
        decision_events(both, "maybe", None, "operator:dana", 6, [])


def test_the_account_that_started_the_run_does_not_decide_it_unless_configured() -> None:
    with pytest.raises(DecisionConflict, match=r"pause 6: .*sam"):
        decision_events(paused("a"), "retry", None, "operator:sam", 6, [])
    assert said(decision_events(paused("a"), "retry", None, "operator:sam", 6, ["sam"]))[0][0] == "ApprovalDecided"
    assert decision_events(paused("a"), "retry", None, "policy:approval_timeout", 6, [])  # not an account


def test_only_a_run_nobody_drives_is_repinned() -> None:
    [(kind, _, payload)] = said(repin_events(paused("a"), {"digest": "sha256:new"}))
    assert kind == "PolicyRepinned" and payload == {"policy": {"digest": "sha256:new"}, "previous": None}
    created = {"workflow": WORKFLOW, "name": "t", "model": None}
    running = RunState.replay("r1", [Event.parsed("r1", 1, "RunCreated", None, created, NOW, "runtime"),
                                     Event.parsed("r1", 2, "RunStarted", None, {}, NOW, "runtime")])  # fmt: skip
    with pytest.raises(DecisionConflict, match="run r1 is running: only a pending, paused or failed run"):
        repin_events(running, {"digest": "sha256:new"})
