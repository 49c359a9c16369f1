"""Open pauses as the operator sees them, the same in the terminal, ``runs show --json``, the API and the console:
the pause's id (what a decision names), its agent, category, reason and the others derived with it, the recovery
hint, the derivation, and how long it has waited. Also each agent's current instructions, which a retry edits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .state import Pause, RunState
from .workflow import workflow_of


def pause_json(run_id: str, pause: Pause, now: datetime | None = None) -> dict[str, Any]:
    """One open pause: ``pause`` is its id (a decision names it), ``age_seconds`` how long it has waited."""
    moment = now or datetime.now(UTC)
    return {
        "run_id": run_id, "pause": pause.id, "agent": pause.agent, "category": pause.category,
        "reason": pause.reason, "others": list(pause.others), "hint": pause.hint,
        "held_call": pause.held_call, "why": pause.why,
        "requested_at": pause.at.isoformat() if pause.at is not None else None,
        "age_seconds": round((moment - pause.at).total_seconds(), 1) if pause.at is not None else None,
    }  # fmt: skip


def pauses_json(state: RunState, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every open pause of the run, oldest first."""
    return [pause_json(state.run_id, pause, now) for pause in state.pauses]


def age(pause: Pause, now: datetime | None = None) -> str:
    """How long the pause has waited, for people: "12 s", "4 min", "3 h", "2 d"."""
    if pause.at is None:
        return "?"
    seconds = max(((now or datetime.now(UTC)) - pause.at).total_seconds(), 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def current_instructions(state: RunState) -> dict[str, str]:
    """Each agent's instructions as its next attempt would get them: the operator's last edit, else the
    workflow's."""
    specs = {a.id: a.instructions for a in workflow_of(state).agents}
    return {agent: node.instructions or specs.get(agent, "") for agent, node in state.nodes.items()}
