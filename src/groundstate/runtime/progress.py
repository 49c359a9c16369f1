"""What a segment of a run writes at its start and its end, decided from the run's state alone.

The deterministic core of driving a run: the state machines (``state.py``) say what each event does to a run; these
functions say which event a driver writes when it takes a run up (it started it, or it resumes it and names the
agents it interrupted) and when no agent is running any more (every agent settled: completed, with each agent's
ending; else failed, naming the agents that cannot proceed). They read nothing but the state they are given and
write nothing — ``segment.py`` writes what they return — so each is tested on states built by hand.
"""

from __future__ import annotations

from typing import Any

from . import run_events as ev
from .state import PENDING, RUNNING, SETTLED, NodeStatus, RunState


def opening(state: RunState, driver: str) -> ev.RunStarted | ev.RunResumed:
    """A pending run is started; any other run a driver takes up is resumed, and the agents that were running when
    its last driver stopped run again (named, so the log says why their attempt starts over)."""
    if state.status == PENDING:
        return ev.RunStarted(model=state.model, driver=driver)
    restarted = [agent for agent, node in state.nodes.items() if node.status == NodeStatus.RUNNING]
    return ev.RunResumed(restarted=restarted, driver=driver)


def closing(state: RunState, learned: list[dict[str, Any]]) -> ev.RunCompleted | ev.RunFailed | None:
    """No agent of the run is running: completed when every agent settled (with ``learned``, the learned rules'
    counts after this run), else failed naming the agents that cannot proceed; None when the run is no longer
    running (it paused, was aborted or failed meanwhile: nothing to add)."""
    if state.status != RUNNING:
        return None
    stuck = sorted(agent for agent, node in state.nodes.items() if node.status not in SETTLED)
    if stuck:
        return ev.RunFailed(error=f"agents that cannot proceed: {', '.join(stuck)}")
    summary = {agent: node.status.value for agent, node in state.nodes.items()}
    return ev.RunCompleted(summary=summary, learned=learned).leaving_out("learned")


def all_settled(state: RunState) -> bool:
    """Every agent of the run succeeded or was skipped: what ``closing`` needs to complete it."""
    return all(node.status in SETTLED for node in state.nodes.values())
