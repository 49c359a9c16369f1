"""Each agent's attempts as its run's event log tells them, for the operator to read side by side: what each attempt
was told, which model answered, its tool calls and their results, its output (its own — never another attempt's),
its tokens and seconds, and the pause that ended it with the decision that answered it.

``RunState`` keeps only an agent's latest output; this view is rebuilt from the events each time it is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import run_events as ev


@dataclass
class Attempt:
    """One attempt of an agent (``number`` 0: the agent was paused before an attempt started, at pre-flight)."""

    number: int
    started_at: datetime | None = None
    model: str = ""
    instructions: str = ""
    status: str = "running"  # running, succeeded, failed, paused, interrupted, not started
    output: str = ""
    thinking: str = ""
    error: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float | None = None
    pause: dict[str, Any] | None = None  # id, category, reason, others, hint of the pause that ended it
    decision: str | None = None  # how that pause was decided ("retry by operator:dana")


def attempts_of(events: list[ev.Event]) -> dict[str, list[Attempt]]:
    """Every agent's attempts, oldest first."""
    found: dict[str, list[Attempt]] = {}
    for event in events:
        step = _STEPS.get(event.type)
        if step is not None:
            step(found, event)
    return found


def _latest(found: dict[str, list[Attempt]], event: ev.Event) -> Attempt | None:
    attempts = found.get(event.agent or "")
    return attempts[-1] if attempts else None


def _started(found: dict[str, list[Attempt]], event: ev.Event) -> None:
    p = event.payload
    attempt = Attempt(int(p.get("attempt", 0)), event.at, str(p.get("backend", "")), str(p.get("instructions", "")))
    found.setdefault(event.agent or "", []).append(attempt)


def _tool_call(found: dict[str, list[Attempt]], event: ev.Event) -> None:
    attempt = _latest(found, event)
    if attempt is not None:
        p = event.payload
        attempt.tools.append({"seq": event.seq, "tool": p["tool"], "target": p.get("target", ""),
                              "payload": p.get("payload", ""), "status": None, "output": ""})  # fmt: skip


def _tool_result(found: dict[str, list[Attempt]], event: ev.Event) -> None:
    attempt = _latest(found, event)
    for call in attempt.tools if attempt is not None else []:
        if call["seq"] == event.payload.get("call"):
            call.update(status=event.payload.get("status"), output=event.payload.get("output", ""),
                        decision=event.payload.get("decision"), reason=event.payload.get("reason"),
                        journal=event.payload.get("journal"))  # fmt: skip


def _ended(status: str) -> Callable[[dict[str, list[Attempt]], ev.Event], None]:
    def end(found: dict[str, list[Attempt]], event: ev.Event) -> None:
        attempt = _latest(found, event)
        if attempt is None or attempt.status != "running":
            return
        p = event.payload
        attempt.status = status
        attempt.output = str(p.get("output", attempt.output))
        attempt.thinking = str(p.get("thinking", attempt.thinking))
        attempt.error = p.get("error", attempt.error)
        given = p.get("usage")
        usage: dict[str, Any] = given if isinstance(given, dict) else {}
        attempt.input_tokens += int(usage.get("input_tokens") or 0)
        attempt.output_tokens += int(usage.get("output_tokens") or 0)
        attempt.seconds = float(usage["seconds"]) if usage.get("seconds") is not None else attempt.seconds
        model = p.get("model")
        attempt.model = str(model) if model else attempt.model

    return end


def _paused(found: dict[str, list[Attempt]], event: ev.Event) -> None:
    p = event.payload
    pause = {"id": event.seq, "category": p["category"], "reason": p["reason"], "hint": p.get("hint", ""),
             "others": [r["reason"] for r in p.get("reasons", []) if r["reason"] != p["reason"]]}  # fmt: skip
    attempt = _latest(found, event)
    if attempt is None or attempt.pause is not None or attempt.decision is not None:  # a pre-flight pause
        attempt = Attempt(0, status="not started")
        found.setdefault(event.agent or "", []).append(attempt)
    attempt.status, attempt.pause = "paused", pause  # its AgentFailed, just before, recorded the error and usage
    attempt.output = str(p.get("output") or attempt.output)  # what the attempt said before it paused
    attempt.thinking = str(p.get("thinking") or attempt.thinking)


def _decided(found: dict[str, list[Attempt]], event: ev.Event) -> None:
    for attempt in found.get(event.agent or "", []):
        if attempt.pause is not None and attempt.pause["id"] == event.payload.get("pause"):
            attempt.decision = f"{event.payload.get('decision')} by {event.actor}"


def _resumed(found: dict[str, list[Attempt]], event: ev.Event) -> None:
    for agent in event.payload.get("restarted", []):
        attempts = found.get(agent)
        if attempts and attempts[-1].status == "running":
            attempts[-1].status = "interrupted"


_STEPS: dict[str, Callable[[dict[str, list[Attempt]], ev.Event], None]] = {
    ev.AGENT_STARTED: _started,
    ev.TOOL_CALL: _tool_call,
    ev.TOOL_RESULT: _tool_result,
    ev.AGENT_COMPLETED: _ended("succeeded"),
    ev.AGENT_FAILED: _ended("failed"),
    ev.APPROVAL_REQUESTED: _paused,
    ev.APPROVAL_DECIDED: _decided,
    ev.RUN_RESUMED: _resumed,
}
