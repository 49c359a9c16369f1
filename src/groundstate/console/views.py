"""How a run is shown: the JSON of the API and the DAG columns of the run page (no decisions here)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..runtime import APPROVAL_REQUESTED, Event, RunState, workflow_of


def instructions_of(state: RunState) -> dict[str, str]:
    """Each agent's current instructions: the operator's edit, or the workflow's."""
    specs = {a.id: a.instructions for a in workflow_of(state).agents}
    return {agent: node.instructions or specs.get(agent, "") for agent, node in state.nodes.items()}


def run_json(state: RunState) -> dict[str, Any]:
    """The run as the API returns it."""
    instructions = instructions_of(state)
    usage = {**state.usage, "running_seconds": round(state.wall_seconds(datetime.now(UTC)), 3)}
    return {
        "run_id": state.run_id, "name": state.name, "status": state.status, "model": state.model,
        "outcome": state.outcome, "usage": usage,
        "nodes": {a: {"status": n.status, "attempts": n.attempts, "output": n.output, "thinking": n.thinking,
                      "status_tag": n.status_tag,
                      "instructions": instructions[a], "tools": n.tools, "error": n.error}
                  for a, n in state.nodes.items()},
        "pause": None if state.pause is None else {
            "agent": state.pause.agent, "category": state.pause.category, "reason": state.pause.reason,
            "hint": state.pause.hint, "others": state.pause.others, "seq": state.pause.seq},
    }  # fmt: skip


def pauses_json(run_id: str, state: RunState) -> list[dict[str, Any]]:
    """The pauses waiting for a decision."""
    return [{"run_id": run_id, "agent": p.agent, "category": p.category, "reason": p.reason, "hint": p.hint,
             "seq": p.seq} for p in state.pauses]  # fmt: skip


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
