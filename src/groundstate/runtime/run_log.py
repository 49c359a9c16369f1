"""The one writer of a driven run's events: everything a driver appends goes through ``RunLog`` — with the agent's
held start and the shadow policy's pending disagreements in the same transaction, and with the guards' reports
made since the last write — and every event written is reported once, to the guards when a cortex pattern listens
for its type and to the observers (the metrics, the listeners).

Three ways to write, by how soon the event must be seen:

- ``emit``: now, in a transaction of its own (a tool call, a pause, the run's start and end);
- ``emit_at_turn_end``: in the transaction that writes every agent's event of this turn of the loop
  (``turn_batch.py``), unless a cortex pattern listens for its type — then now, as ``emit``;
- ``start``: an agent's ``AgentStarted``, held until its next event or ``WRITTEN_WITHIN`` seconds
  (``deferred_starts.py``), unless a cortex pattern listens for starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..errors import StoreError
from . import run_events as ev
from .deferred_starts import DeferredStarts
from .reported import ReportedGuards
from .state import RunEnded
from .store import EventStore, LeaseLost
from .turn_batch import TurnBatch


class RunLog:
    """The events one driver appends to one run, under its lease (``holder``)."""

    def __init__(
        self,
        store: EventStore,
        run_id: str,
        holder: str,
        guards: ReportedGuards,
        triggers: frozenset[str],
        observe: Callable[[ev.Event], None],
    ) -> None:
        self.store, self.run_id, self.holder = store, run_id, holder
        self.guards = guards  # told of the events cortex patterns listen for; its reports go with each write
        self.triggers = triggers  # the event types a cortex pattern listens for
        self.observe = observe  # the metrics and the listeners
        self.starts = DeferredStarts()  # agents' starts not yet written
        self.turn = TurnBatch(self._write, self._report)  # events written at the end of this turn of the loop

    def emit(self, body: ev.EventBody, agent: str | None = None) -> ev.Event:
        """Append one event now (after the agent's start when that is still held: one transaction), then report it;
        returns it as stored."""
        events = self._write(self._after_held_start(body, agent))
        for event in events:
            self._report(event)
        return events[-1]

    async def emit_at_turn_end(self, body: ev.EventBody, agent: str) -> ev.Event:
        """``emit``, in the transaction that writes the events of every agent that emits in this turn of the loop;
        returns once it is written. When a cortex pattern listens for the event it is written and reported at once,
        for the guards must see it before any other agent's decision."""
        if body.NAME in self.triggers:
            return self.emit(body, agent)
        return (await self.turn.append(self._after_held_start(body, agent)))[-1]

    def start(self, agent: str, started: ev.AgentStarted) -> None:
        """The agent's start: held for its next event unless a cortex pattern listens for starts — then the guards
        must see it now, before anything the attempt does."""
        if ev.AGENT_STARTED in self.triggers:
            self.emit(started, agent)
            return

        def write_alone(held: str) -> None:
            alone = self.starts.take(held)
            if alone is None:
                return
            try:
                self.emit(alone, held)
            except (LeaseLost, RunEnded):
                pass  # the attempt hears it at its next event
            except StoreError:
                self.starts.defer(held, alone, None)  # the next event writes it, or fails in the attempt itself

        self.starts.defer(agent, started, write_alone)

    def queued(self) -> Iterator[ev.EventBody]:
        """The events queued for the end of this turn, not yet written."""
        for body, _ in self.turn.queued():
            yield body

    def close(self) -> None:
        """The driver stops: the starts still held are forgotten (their attempts run again on resume)."""
        self.starts.drop_all()

    def _write(self, items: ev.Planned) -> list[ev.Event]:
        """Append ``items`` with the guard reports made since the last write (reported.py), in one transaction;
        reports whose transaction failed go with the next."""
        reports = self.guards.take_reports()
        try:
            return self.store.transact(self.run_id, lambda _: items, holder=self.holder, reports=reports)
        except BaseException:
            self.guards.give_back(reports)
            raise

    def _after_held_start(self, body: ev.EventBody, agent: str | None) -> ev.Planned:
        """The event, after the agent's held start and the shadow policy's disagreements: one transaction."""
        started = self.starts.take(agent)
        shadowed = self.guards.take_pending()
        return [*([(started, agent)] if started is not None else []),
                *[(disagreement, None) for disagreement in shadowed],
                (body, agent)]  # fmt: skip

    def _report(self, event: ev.Event) -> None:
        """An appended event to the guards when a cortex pattern listens for it, then to the observers."""
        if event.type in self.triggers:
            self.guards.event(event.seq, event.type, event.agent)
        self.observe(event)
