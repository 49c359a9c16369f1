"""Operator decisions on a run's pauses, as events: which pause a decision answers, whether the deciding account
may decide it, and what the log records — pure functions of the run's state, needing no driver, no model and no
kernel (``Runtime.decide`` writes what they return, serialised with every other write to the run)."""

from __future__ import annotations

from typing import Any, get_args

from ..errors import InputError, StateConflict
from ..store import decision_refused
from . import run_events as ev
from .state import AWAITING_APPROVAL, FAILED, PENDING, Pause, RunState

DECISIONS: tuple[ev.Verdict, ...] = get_args(ev.Verdict)
Planned = ev.Planned  # (event body, agent) to append


class DecisionError(InputError, ValueError):
    """A decision that cannot apply as given (an unknown decision, several open pauses and none named)."""


class DecisionConflict(DecisionError, StateConflict):
    """A decision the run's state no longer admits: its pause was decided, the run is not awaiting approval, or
    the deciding account started the run (separation of duties)."""


def decision_problem(decision: str | None, instructions: bool) -> str | None:
    """What is wrong with a decision given on the command line (None: nothing): an unknown one, or new instructions
    with anything but a retry — they would be ignored, so they are refused."""
    if decision is not None and decision not in DECISIONS:
        return f"--decide must be one of {', '.join(DECISIONS)}"
    if instructions and decision != "retry":
        given = f"--decide {decision}" if decision else "no --decide"
        return f"--instructions are for a retried agent (--decide retry), not {given}"
    return None


def check_decision(decision: str) -> ev.Verdict:
    """The decision, as one of ``DECISIONS`` (DecisionError for any other)."""
    if decision not in DECISIONS:
        raise DecisionError(f"unknown decision {decision!r}: use retry, skip or abort")
    return decision


def decision_events(
    state: RunState,
    decision: str,
    instructions: str | None,
    actor: str,
    pause: int | None,
    self_approval: tuple[str, ...] | list[str],
) -> Planned:
    """The events that record ``actor``'s ``decision`` on the open pause ``pause`` (None: the one open pause):
    the decision, and the skip or the abort it means. DecisionConflict when the pause is not open or the deciding
    account started the run (``access.mg``, unless ``self_approval`` names it); DecisionError when several are
    open and none is named."""
    verdict = check_decision(decision)
    answered = answered_pause(state, pause)
    deciding = account(actor)
    refused = deciding and decision_refused(deciding, account(state.created_by), self_approval)
    if refused:  # access.mg: whoever started the run does not decide its pauses
        raise DecisionConflict(f"run {state.run_id}, pause {answered.id}: {refused}")
    new = {"instructions": instructions} if instructions and decision == "retry" else {}
    out: Planned = [(ev.ApprovalDecided(decision=verdict, pause=answered.seq, reason=answered.reason, **new),
                     answered.agent)]  # fmt: skip
    if decision == "skip" and answered.agent:
        out.append((ev.AgentSkipped(by=actor), answered.agent))
    if decision == "abort":
        out.append((ev.RunAborted(reason=f"aborted by {actor}"), answered.agent))
    return out


def repin_events(state: RunState, policy: dict[str, Any]) -> Planned:
    """The event that pins the run to ``policy`` (its JSON), naming the previous digest; DecisionConflict unless
    nobody drives the run (pending, awaiting approval or failed)."""
    if state.status not in (PENDING, AWAITING_APPROVAL, FAILED):
        raise DecisionConflict(f"run {state.run_id} is {state.status}: only a pending, paused or failed run can be "
                               "re-pinned")  # fmt: skip
    previous = (state.policy or {}).get("digest")
    return [(ev.PolicyRepinned(policy=policy, previous=previous), None)]


def account(actor: str) -> str | None:
    """The operator account an actor of the event log names (``operator:dana``), or None (the runtime, a policy)."""
    return actor.removeprefix("operator:") if actor.startswith("operator:") else None


def answered_pause(state: RunState, pause: int | None) -> Pause:
    """The open pause a decision answers (DecisionConflict or DecisionError saying why there is none)."""
    if pause is not None:
        found = state.open_pause(pause)
        if found is not None and state.status == AWAITING_APPROVAL:
            return found
        if pause in state.decided:
            raise DecisionConflict(f"pause {pause} of run {state.run_id} is no longer open: {state.decided[pause]}")
        raise DecisionConflict(f"run {state.run_id} has no open pause {pause}{_open_ones(state)}")
    if state.status != AWAITING_APPROVAL or not state.pauses:
        raise DecisionConflict(f"run {state.run_id} is {state.status}, not awaiting approval: nothing to decide")
    if len(state.pauses) > 1:
        raise DecisionError(f"run {state.run_id} has {len(state.pauses)} open pauses{_open_ones(state)}; name the "
                            "one you decide")  # fmt: skip
    return state.pauses[0]


def _open_ones(state: RunState) -> str:
    if not state.pauses or state.status != AWAITING_APPROVAL:
        return f" (it is {state.status}: no pause is open)"
    return " (open: " + ", ".join(f"{p.id} for {p.agent or 'the run'}" for p in state.pauses) + ")"
