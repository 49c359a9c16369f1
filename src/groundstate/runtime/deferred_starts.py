"""An agent's ``AgentStarted`` written together with its next event, or on its own once ``WRITTEN_WITHIN`` seconds
have passed, whichever comes first.

Every event is a transaction of the store, and a node used to cost two: its start before the model was asked, its
completion after. When the model answers quickly (a cache, a small local model, a scripted backend) the start and
the completion are now one transaction (bench/runtime); when it takes longer, the start is written after
``WRITTEN_WITHIN`` seconds, so the console and other processes see the agent running as they did.

What this changes if the driver dies inside that window: the start was never written, so on resume the node is
pending, not interrupted, and runs again as the same attempt. Nothing of it had reached the log, and no tool had run:
a tool call's event carries the held start with it in one transaction, and the journal's intent comes after that
event. What it may have written is its memory entries (just before its completion), which are keyed: written again,
they change nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .run_events import AgentStarted

WRITTEN_WITHIN = 0.05  # seconds an agent's start may wait for its next event before it is written alone


class DeferredStarts:
    """The starts of one run's agents not yet written, each with the timer that writes it alone."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[AgentStarted, asyncio.TimerHandle | None]] = {}

    def defer(self, agent: str, started: AgentStarted, write_alone: Callable[[str], None] | None) -> None:
        """Hold ``agent``'s start; ``write_alone(agent)`` runs after WRITTEN_WITHIN seconds unless the start was
        taken first (None: no timer — the next event takes it)."""
        timer = asyncio.get_running_loop().call_later(WRITTEN_WITHIN, write_alone, agent) if write_alone else None
        self._pending[agent] = (started, timer)

    def take(self, agent: str | None) -> AgentStarted | None:
        """The held start of ``agent`` (no longer held, its timer stopped), or None."""
        held = self._pending.pop(agent, None) if agent is not None else None
        if held is None:
            return None
        started, timer = held
        if timer is not None:
            timer.cancel()
        return started

    def drop_all(self) -> None:
        """Forget every held start (the driver stops: its attempts end unwritten, and run again on resume)."""
        for agent in list(self._pending):
            self.take(agent)


__all__ = ["WRITTEN_WITHIN", "DeferredStarts"]
