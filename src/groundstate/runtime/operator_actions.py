"""What an operator does to a run from outside it: decide a pause, let pauses nobody decided time out, re-pin a run
to the current policy. None of these needs a run's context (its models, tools or guards): each is one transaction
on the run's log, serialised with every other write to it, and the events it appends are reported like any other.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from ..errors import StoreError
from ..store import ToolJournal
from . import run_events as ev
from .decisions import DecisionError, Planned, check_decision, decision_events, repin_events
from .options import RuntimeOptions
from .state import RunEnded, RunState
from .store import EventStore, StoreCorrupt
from .timeouts import ACTOR as TIMEOUT_ACTOR
from .timeouts import expired
from .workflow import parse_workflow

log = logging.getLogger("groundstate.runtime")


class OperatorActions:
    """The operator's decisions on the runs of one store, under one runtime's options."""

    def __init__(self, store: EventStore, journal: ToolJournal, options: RuntimeOptions,
                 notify: Callable[[ev.Event], None]) -> None:  # fmt: skip
        self.store, self.journal, self.options, self.notify = store, journal, options, notify

    def decide(self, run_id: str, decision: str, instructions: str | None = None, actor: str = "operator",
               pause: int | None = None) -> RunState:  # fmt: skip
        """``Runtime.decide``: the decision on one open pause, and the skip or abort it means."""
        check_decision(decision)
        ending = decision == "abort"  # acts on nothing the log says: ends even a run whose log was changed
        if not ending:
            self.store.check_untouched(run_id, self.options.audit_key, self.options.audit_required,
                                       f"the decision {decision} is")  # fmt: skip
        self_approval = self.options.self_approval

        def build(state: RunState) -> Planned:
            return decision_events(state, decision, instructions, actor, pause, self_approval)

        # serialised with every other write to the run
        for event in self.store.transact(run_id, build, actor, despite_changes=ending):
            self.notify(event)
            if event.type == ev.APPROVAL_DECIDED and event.agent:  # the operator has seen its calls in doubt
                try:
                    self.journal.resolve(f"run:{run_id}/{event.agent}/", actor, decision)
                except StoreError as exc:  # the decision is recorded; the calls stay in doubt: the run pauses again
                    log.warning("run %s: %s is recorded, but the agent's calls in doubt could not be marked as "
                                "seen (%s); resuming the run pauses it on them again", run_id, decision, exc)
        return self.store.state(run_id)

    def expire_pauses(self, now: datetime | None = None) -> list[tuple[str, int, str]]:
        """``Runtime.expire_pauses``: every pause older than ``[approvals] timeout_sec`` decided as approvals.mg
        says."""
        timeout = self.options.approval_timeout_sec
        if timeout is None:
            return []
        waiting = self.store.awaiting().states  # a run whose log cannot be read cannot be decided either
        due = expired([(state.run_id, pause) for state in waiting for pause in state.pauses], timeout,
                      self.options.approval_default, now or datetime.now(UTC))  # fmt: skip
        decided = []
        for run_id, pause, decision in due:
            try:
                self.decide(run_id, decision, actor=TIMEOUT_ACTOR, pause=pause)
            except (DecisionError, RunEnded):  # decided, or the run aborted, meanwhile
                continue
            except StoreCorrupt as exc:  # its log was changed: left waiting, said so, the others decided
                log.warning("run %s: its timed-out pause is not decided: %s", run_id, exc)
                continue
            decided.append((run_id, pause, decision))
        return decided

    def repin(self, run_id: str, actor: str = "operator") -> RunState:
        """``Runtime.repin``: the run pinned to the options' policy, under a lease of its own so no driver starts
        meanwhile."""
        self.store.check_untouched(run_id, self.options.audit_key, self.options.audit_required, "re-pinning is")
        holder = f"repin:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.store.acquire_lease(run_id, holder, self.options.lease_seconds)
        try:

            def build(state: RunState) -> Planned:
                planned = repin_events(state, self.options.policy.to_json())
                parse_workflow(state.workflow, run_id, roles=self.options.roles)  # every agent keeps a role
                return planned

            self.store.transact(run_id, build, actor)
        finally:
            with contextlib.suppress(StoreError):
                self.store.release_lease(run_id, holder)
        return self.store.state(run_id)
