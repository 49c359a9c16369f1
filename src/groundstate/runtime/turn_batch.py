"""Events a run's agents append during one turn of the event loop, written together in one transaction when the
turn ends: a group commit without a timer.

Every transaction of the store costs a commit (on SQLite, the WAL frames of every page it changed) and the fixed
statements around its events (lock the run's row, update it): about 100 µs, more than the events themselves
(bench/runtime). Agents that finish in the same turn of the loop — a layer of a DAG whose models answered together —
now share one. Nobody is held back for anybody: the batch is written as soon as the turn that queued it ends, and an
agent goes on only once its own events are written (it awaits them), so nothing it does next, and nothing the
scheduler starts because of it, runs ahead of the log. An agent that finishes alone pays one more turn of the loop
(a few microseconds) and the same transaction as before.

When the batch cannot be written as a whole (one event refused, the lease lost, the database failing), each agent's
events are written on their own, in the order they were queued, so each learns its own outcome exactly as it would
have without the batch, and an agent whose events were refused does not take the others down with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

from .run_events import Event, EventBody

Item = tuple[EventBody, str | None]  # (event body, agent), as EventStore.transact's builder gives


class TurnBatch:
    """The events queued in this turn of the loop, with the future each queueing agent awaits."""

    def __init__(self, write: Callable[[list[Item]], list[Event]], observe: Callable[[Event], None]) -> None:
        """``write`` appends events in one transaction and returns them as stored; ``observe`` reports one stored
        event (to the metrics, the guards, the listeners) before the agent that queued it goes on."""
        self._write = write
        self._observe = observe
        self._queued: list[tuple[list[Item], asyncio.Future[list[Event]]]] = []

    def queued(self) -> Iterator[Item]:
        """The events queued and not written yet: what agents have decided in this turn (their usage counts
        toward the run's totals before it is in the log)."""
        for items, _ in self._queued:
            yield from items

    async def append(self, items: list[Item]) -> list[Event]:
        """Queue ``items`` (one agent's events, in order) and return them as stored once the turn's batch is written;
        the store's error for them if they could not be."""
        loop = asyncio.get_running_loop()
        if not self._queued:
            loop.call_soon(self.flush)
        future: asyncio.Future[list[Event]] = loop.create_future()
        self._queued.append((items, future))
        return await future

    def flush(self) -> None:
        """Write every queued event: one transaction, or one per agent when the whole cannot be written. Never
        raises: each error goes to the agent whose events it concerns (an agent cancelled meanwhile is not told)."""
        queued, self._queued = self._queued, []
        if not queued:
            return
        try:
            written = self._write([item for items, _ in queued for item in items])
        except Exception:
            for items, future in queued:
                self._settle(future, items, None)
            return
        at = 0
        for items, future in queued:
            self._settle(future, items, written[at : at + len(items)])
            at += len(items)

    def _settle(self, future: asyncio.Future[list[Event]], items: list[Item], written: list[Event] | None) -> None:
        try:
            stored = self._write(items) if written is None else written
            for event in stored:
                self._observe(event)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(stored)


__all__ = ["Item", "TurnBatch"]
