"""How a run is shown: the JSON of the API and the DAG columns of the run page (no decisions here)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..runtime import APPROVAL_REQUESTED, Event, RunState, current_instructions, pauses_json, workflow_of


def run_json(state: RunState) -> dict[str, Any]:
    """The run as the API returns it: every open pause in ``pauses`` (a decision names one by its ``pause`` id)."""
    instructions = current_instructions(state)
    usage = {**state.usage, "running_seconds": round(state.wall_seconds(datetime.now(UTC)), 3)}
    return {
        "run_id": state.run_id, "name": state.name, "status": state.status, "model": state.model,
        "outcome": state.outcome, "usage": usage, "created_by": state.created_by,
        "nodes": {a: {"status": n.status, "attempts": n.attempts, "output": n.output, "thinking": n.thinking,
                      "status_tag": n.status_tag,
                      "instructions": instructions[a], "tools": n.tools, "error": n.error}
                  for a, n in state.nodes.items()},
        "pauses": pauses_json(state),
    }  # fmt: skip


def why_json(events: list[Event]) -> list[dict[str, Any]]:
    """Each pause of the run with the rules and facts that derived it."""
    return [{"seq": e.seq, "agent": e.agent, "reason": e.payload["reason"], "why": e.payload.get("why")}
            for e in events if e.type == APPROVAL_REQUESTED]  # fmt: skip


def layers(state: RunState) -> list[list[tuple[str, list[str]]]]:
    """The DAG in columns: each agent one column right of its deepest dependency."""
    depends = {a.id: a.depends_on for a in workflow_of(state).agents}
    depth: dict[str, int] = {}
    for agent in state.nodes:
        depth[agent] = 1 + max((depth.get(d, 0) for d in depends.get(agent, [])), default=-1)
    columns: list[list[tuple[str, list[str]]]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for agent in state.nodes:
        columns[depth[agent]].append((agent, depends.get(agent, [])))
    return columns
