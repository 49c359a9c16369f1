"""Effects through the tool journal: each action the router runs is journaled before (intent) and after (result),
so a driver that dies mid-call never has its calls silently repeated (``store.ToolJournal`` says how).

A call is identified by where it happened (the journal scope the runtime gives: run, agent, epoch), its position
among the scope's calls, and the exact call (executor, type, target, payload). When the same call at the same
position already has a result, the result is returned and nothing runs; its facts are asserted again with the new
action id in place of the old one.
"""

from __future__ import annotations

import itertools
from typing import Any

from ..logic import Float, Name
from ..store import ToolJournal
from .config import ShardProfile
from .executors import Action, Outcome
from .store import VirtualStore


class JournaledEffects:
    """The journal of one scope, used by the router in place of running the virtual store directly."""

    def __init__(self, journal: ToolJournal, scope: str) -> None:
        self.journal, self.scope = journal, scope
        self._positions = itertools.count(1)

    def run(self, store: VirtualStore, executor: str, action: Action, profile: ShardProfile) -> Outcome:
        """The executor's outcome, from the journal when this call already ran (``Outcome.replayed``); raises
        ``CallInDoubt`` when it was in flight in a driver that died."""
        position = next(self._positions)
        call = {"executor": executor, "target": action.target, "payload": action.payload}
        recorded = self.journal.begin(self.scope, position, action.type, call)
        if recorded is not None:
            return _outcome(recorded, action.action_id)
        self.journal.durable()  # the intent on the disk before the effect: a power loss cannot make it run twice
        outcome = store.run(executor, action, profile)
        self.journal.finish(self.scope, position, action.type, call, _recorded(outcome, action.action_id))
        return outcome


def _recorded(outcome: Outcome, action_id: str) -> dict[str, Any]:
    facts = [[predicate, [_value(v, action_id) for v in row]] for predicate, row in outcome.facts]
    return {"ok": outcome.ok, "output": outcome.output, "facts": facts}


def _outcome(recorded: dict[str, Any], action_id: str) -> Outcome:
    facts = [(str(predicate), tuple(_restored(v, action_id) for v in row)) for predicate, row in recorded["facts"]]
    return Outcome(bool(recorded["ok"]), str(recorded["output"]), facts, replayed=True)


def _value(value: Any, action_id: str) -> Any:
    """A fact's value as JSON: names and floats tagged, this action's own id marked so a replay can use its own."""
    if isinstance(value, Name):
        return {"action": True} if value.text == action_id else {"name": value.text}
    if isinstance(value, Float | float):
        return {"float": float(value)}
    return value


def _restored(value: Any, action_id: str) -> Any:
    if isinstance(value, dict):
        if value.get("action"):
            return Name(action_id)
        if "name" in value:
            return Name(value["name"])
        return Float(value["float"])
    return value
