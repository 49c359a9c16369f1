"""A run's state, derived from its events and from nothing else (so a restart rebuilds it exactly).

Theory of operation
-------------------
Two state machines read the same event log. The run's status (``RunStatus``) moves along ``RUN_EDGES``: for each
status, the events that may follow it and the status each leads to. Each agent's invocation (``NodeStatus``) moves
along ``NODE_EDGES`` on the events that name it; a decision is keyed with its verdict (``ApprovalDecided:retry``),
since a retry sends the agent back to pending while a skip or an abort leaves it paused until its own event. Events
that name no known agent change only the run.

An event with no edge from the current status is refused with ``EventRefused`` — the named error state. Before an
event is stored, ``RunState.admit`` refuses it (the writer learns at once, nothing is appended); when a stored log
is replayed, a refused event means the log was changed outside groundstate, and the store reports it as corrupt.
``COMPLETED`` and ``ABORTED`` have no edges at all; ``FAILED`` has two (``RunResumed``: a failed run may be
resumed; ``PolicyRepinned``: the operator may re-pin it first, as a pending or paused run). One transition depends
on more than the table: after a decision the run runs again only once its last pause is decided by retry or skip
(``ApprovalDecided`` otherwise keeps it awaiting approval).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from ..errors import StoreError
from ..store import call_digest
from . import run_events as ev


class RunStatus(StrEnum):
    """Where a run is; stored and shown as its string value."""

    PENDING = "pending"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    ABORTED = "aborted"


class NodeStatus(StrEnum):
    """Where one agent's invocation is."""

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    SKIPPED = "skipped"
    FAILED = "failed"


PENDING, RUNNING, AWAITING_APPROVAL = RunStatus.PENDING, RunStatus.RUNNING, RunStatus.AWAITING_APPROVAL
COMPLETED, FAILED, ABORTED = RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.ABORTED
SUCCEEDED, PAUSED, SKIPPED = NodeStatus.SUCCEEDED, NodeStatus.PAUSED, NodeStatus.SKIPPED
FINISHED = (COMPLETED, FAILED, ABORTED)
TERMINAL = (COMPLETED, ABORTED)  # nothing follows these; a failed run may still be resumed
SETTLED = (SUCCEEDED, SKIPPED)  # an agent's: no edge leaves these (NODE_EDGES); its dependants may run

_AGENT_WORK = (ev.NODE_CREATED, ev.AGENT_STARTED, ev.TOOL_CALL, ev.TOOL_RESULT, ev.AGENT_COMPLETED, ev.AGENT_FAILED,
               ev.AGENT_SKIPPED)  # fmt: skip
_STAYS_RUNNING = {event: RunStatus.RUNNING for event in (*_AGENT_WORK, ev.SHADOW_DISAGREED)}
_STAYS_AWAITING = {event: RunStatus.AWAITING_APPROVAL for event in (*_AGENT_WORK, ev.SHADOW_DISAGREED)}  # others go on
_ENDINGS = {ev.RUN_FAILED: RunStatus.FAILED, ev.RUN_ABORTED: RunStatus.ABORTED}

RUN_EDGES: dict[RunStatus, dict[str, RunStatus]] = {
    RunStatus.PENDING: {
        ev.RUN_CREATED: RunStatus.PENDING, ev.NODE_CREATED: RunStatus.PENDING, ev.RUN_STARTED: RunStatus.RUNNING,
        ev.POLICY_REPINNED: RunStatus.PENDING, **_ENDINGS,
    },
    RunStatus.RUNNING: {
        **_STAYS_RUNNING, ev.RUN_RESUMED: RunStatus.RUNNING, ev.APPROVAL_REQUESTED: RunStatus.AWAITING_APPROVAL,
        ev.RUN_COMPLETED: RunStatus.COMPLETED, **_ENDINGS,
    },
    RunStatus.AWAITING_APPROVAL: {
        **_STAYS_AWAITING, ev.APPROVAL_REQUESTED: RunStatus.AWAITING_APPROVAL,
        ev.APPROVAL_DECIDED: RunStatus.AWAITING_APPROVAL, ev.POLICY_REPINNED: RunStatus.AWAITING_APPROVAL, **_ENDINGS,
    },
    RunStatus.FAILED: {ev.RUN_RESUMED: RunStatus.RUNNING, ev.POLICY_REPINNED: RunStatus.FAILED},
    RunStatus.COMPLETED: {},
    RunStatus.ABORTED: {},
}  # fmt: skip

NODE_EDGES: dict[NodeStatus, dict[str, NodeStatus]] = {
    NodeStatus.PENDING: {
        ev.AGENT_STARTED: NodeStatus.RUNNING, ev.APPROVAL_REQUESTED: NodeStatus.PAUSED,  # a pre-flight pause
        ev.AGENT_SKIPPED: NodeStatus.SKIPPED, ev.AGENT_FAILED: NodeStatus.FAILED,
    },
    NodeStatus.RUNNING: {
        ev.TOOL_CALL: NodeStatus.RUNNING, ev.TOOL_RESULT: NodeStatus.RUNNING, ev.AGENT_COMPLETED: NodeStatus.SUCCEEDED,
        ev.AGENT_FAILED: NodeStatus.FAILED, ev.APPROVAL_REQUESTED: NodeStatus.PAUSED,
    },
    NodeStatus.PAUSED: {
        ev.APPROVAL_DECIDED + ":retry": NodeStatus.PENDING, ev.APPROVAL_DECIDED + ":skip": NodeStatus.PAUSED,
        ev.APPROVAL_DECIDED + ":abort": NodeStatus.PAUSED, ev.AGENT_SKIPPED: NodeStatus.SKIPPED,
    },
    NodeStatus.FAILED: {ev.APPROVAL_REQUESTED: NodeStatus.PAUSED},  # the breaker after a hard error
    NodeStatus.SUCCEEDED: {},
    NodeStatus.SKIPPED: {},
}  # fmt: skip
_NODE_EVENTS = frozenset(key.split(":")[0] for row in NODE_EDGES.values() for key in row)


class EventRefused(StoreError):
    """An event that cannot follow the run's (or its agent's) current status: the state machines' error state."""


class RunEnded(EventRefused):
    """The run has ended; no event may follow its terminal event."""


@dataclass
class Invocation:
    """One agent's invocation as the log tells it: status, attempts, output, tool calls, error."""

    agent: str
    status: NodeStatus = NodeStatus.PENDING
    attempts: int = 0
    output: str = ""  # the surface response of the last successful attempt
    thinking: str = ""  # its reasoning traces
    status_tag: str | None = None
    instructions: str | None = None  # the operator's edited instructions, if any
    tools: list[dict[str, Any]] = field(default_factory=list)  # the last attempt's tool calls and results
    error: str | None = None
    journal_epoch: int = 0  # the tool journal's epoch of the last attempt (AgentStarted's "journal")
    interrupted: bool = False  # restarted by RunResumed since its last start: the next attempt keeps the epoch


@dataclass
class Pause:
    """An approval waiting for the operator: whose, why, and the event that asked for it."""

    agent: str | None
    category: str  # "safety" or "quality"
    reason: str
    hint: str
    seq: int  # the ApprovalRequested event
    others: list[str] = field(default_factory=list)  # further reasons derived at the same checkpoint
    held_call: int | None = None  # the ToolCall the pause holds (a /tool_call pause)
    approvals: list[tuple[str, str]] = field(default_factory=list)  # (category, reason) of every reason shown
    at: datetime | None = None  # when it was asked for
    why: dict[str, Any] | None = None  # the derivation of the reason it leads with (rules and facts)

    @property
    def id(self) -> int:
        """How a decision names the pause it answers: the sequence number of its ApprovalRequested event."""
        return self.seq


@dataclass(frozen=True)
class ApprovedCall:
    """A call an operator let through: its digest and the reasons they saw when it was held."""

    digest: str
    reasons: list[tuple[str, str]]  # (category, reason)


@dataclass
class RunState:
    """A run as its event log tells it: status, agents, pauses (rebuilt exactly by ``replay``)."""

    run_id: str
    workflow: str = ""  # the workflow's YAML text, as started
    name: str = ""
    model: str | None = None
    policy: dict[str, Any] | None = None  # the pinned policy (runtime/policy.py); None for runs created before pins
    models: dict[str, str] = field(default_factory=dict)  # agent -> model the configuration chose at creation
    budgets: dict[str, float] = field(default_factory=dict)  # what the run may spend (recorded at creation)
    fallback: list[str] = field(default_factory=list)  # models tried, in order, when one fails before its first token
    credentials: list[str] = field(default_factory=list)  # origins the operator's own --model named: keyed requests
    created_by: str = ""  # who started the run, as its RunCreated event names them (operator:NAME, runtime, ...)
    status: RunStatus = RunStatus.PENDING
    nodes: dict[str, Invocation] = field(default_factory=dict)
    spawned: list[dict[str, Any]] = field(default_factory=list)  # agents added by cortex patterns
    pauses: list[Pause] = field(default_factory=list)  # approvals waiting, oldest first
    last_seq: int = 0
    outcome: str | None = None
    usage: dict[str, float] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "seconds": 0.0,
                                                             "cost": 0.0})  # fmt: skip
    prices: dict[str, dict[str, float]] = field(default_factory=dict)  # the price table, recorded at creation
    running_seconds: float = 0.0  # time spent running (not pending, paused or failed) before running_since
    running_since: datetime | None = None  # when the run last started running, while it runs
    notes: dict[str, str] = field(default_factory=dict)  # the run's working memory: agents' `note` operations
    approved_calls: dict[str, list[ApprovedCall]] = field(default_factory=dict)  # agent -> calls an operator
    # approved by retrying the pause that held them; each lets one identical call through, once
    decided: dict[int, str] = field(default_factory=dict)  # pause id -> how it was decided ("retry by ... at ...")

    def wall_seconds(self, now: datetime) -> float:
        """How long the run has been running, pauses and failures excluded."""
        current = (now - self.running_since).total_seconds() if self.running_since is not None else 0.0
        return self.running_seconds + max(current, 0.0)

    @property
    def pause(self) -> Pause | None:
        """The oldest open pause (a run may have several: ``pauses``; a decision names the one it answers)."""
        return self.pauses[0] if self.pauses else None

    def open_pause(self, pause_id: int) -> Pause | None:
        """The open pause with this id, if it is still open."""
        return next((p for p in self.pauses if p.id == pause_id), None)

    def admit(self, event_type: str, agent: str | None = None, payload: dict[str, Any] | None = None) -> None:
        """Refuse (EventRefused) an event that has no edge from the current statuses; return if it may follow."""
        if event_type not in RUN_EDGES[self.status]:
            if self.status in FINISHED:
                raise RunEnded(f"run {self.run_id} has ended ({self.status}); no {event_type} event can follow")
            raise EventRefused(f"run {self.run_id} is {self.status}: no {event_type} event can follow")
        node = self.nodes.get(agent or "")
        if (
            node is not None
            and event_type in _NODE_EVENTS
            and _node_key(event_type, payload) not in NODE_EDGES[node.status]
        ):
            raise EventRefused(f"agent {agent} of run {self.run_id} is {node.status}: no {event_type} can follow")
        if event_type == ev.APPROVAL_DECIDED and (payload or {}).get("pause") not in [x.seq for x in self.pauses]:
            raise EventRefused(f"run {self.run_id}: the decision answers no waiting pause")
        for restarted in (payload or {}).get("restarted", []) if event_type == ev.RUN_RESUMED else []:
            if getattr(self.nodes.get(restarted), "status", None) != NodeStatus.RUNNING:
                raise EventRefused(f"run {self.run_id}: {restarted} was not running, so it cannot be restarted")

    def apply(self, event: ev.Event) -> None:
        """Move both machines along the event (refused with EventRefused if it has no edge)."""
        self.admit(event.type, event.agent, event.payload)
        before = self.status
        node = self.nodes.get(event.agent or "")
        self.last_seq = event.seq
        self.status = RUN_EDGES[self.status][event.type]
        if node is not None and event.type in _NODE_EVENTS:
            node.status = NODE_EDGES[node.status][_node_key(event.type, event.payload)]
        record = _RECORDS.get(event.type)
        if record is not None:
            record(self, event, node)
        if before != RunStatus.RUNNING and self.status == RunStatus.RUNNING:
            self.running_since = event.at
        elif before == RunStatus.RUNNING and self.status != RunStatus.RUNNING and self.running_since is not None:
            self.running_seconds += max((event.at - self.running_since).total_seconds(), 0.0)
            self.running_since = None

    @classmethod
    def replay(cls, run_id: str, events: list[ev.Event]) -> RunState:
        """The state after ``events`` (EventRefused if the log breaks a transition rule)."""
        state = cls(run_id)
        for event in events:
            state.apply(event)
        return state


def _node_key(event_type: str, payload: dict[str, Any] | None) -> str:
    if event_type == ev.APPROVAL_DECIDED:
        return f"{event_type}:{(payload or {}).get('decision')}"
    return event_type


# -- what each event records beside the statuses ---------------------------------------------------------------
def _created(state: RunState, event: ev.Event, _node: Invocation | None) -> None:
    p = event.payload
    state.workflow, state.name, state.model = p["workflow"], p["name"], p.get("model")
    state.policy = p.get("policy")
    state.models = dict(p.get("models") or {})
    state.budgets = dict(p.get("budgets") or {})
    state.fallback = list(p.get("fallback") or [])
    state.credentials = list(p.get("credentials") or [])
    state.prices = dict(p.get("prices") or {})
    state.created_by = event.actor


def _repinned(state: RunState, event: ev.Event, _node: Invocation | None) -> None:
    state.policy = event.payload["policy"]


def _node_created(state: RunState, event: ev.Event, _node: Invocation | None) -> None:
    p = event.payload
    state.nodes[p["agent"]] = Invocation(p["agent"])
    if p.get("spec"):
        state.spawned.append(p["spec"])


def _restarted(state: RunState, event: ev.Event, _node: Invocation | None) -> None:
    for agent in event.payload.get("restarted", []):  # interrupted mid-invocation: it runs again
        state.nodes[agent].status = NodeStatus.PENDING
        state.nodes[agent].interrupted = True


def _started(_state: RunState, event: ev.Event, node: Invocation | None) -> None:
    if node is not None:
        node.attempts, node.tools, node.error = event.payload["attempt"], [], None
        node.journal_epoch = event.payload.get("journal", event.payload["attempt"])  # runs before the journal: one
        node.interrupted = False


def _tool_call(_state: RunState, event: ev.Event, node: Invocation | None) -> None:
    if node is not None:
        p = event.payload
        node.tools.append({"seq": event.seq, "tool": p["tool"], "target": p.get("target", ""),
                           "payload": p.get("payload", "")})  # fmt: skip


def tool_call_digest(call: dict[str, Any]) -> str:
    """The digest of a tool call as the model made it (tool, target, payload): what an approval is bound to."""
    return call_digest(str(call["tool"]), {"target": call.get("target", ""), "payload": call.get("payload", "")})


def _tool_result(state: RunState, event: ev.Event, node: Invocation | None) -> None:
    if node is None:
        return
    p = event.payload
    for call in reversed(node.tools):  # a result follows its call closely: looked for from the newest (seqs are unique)
        if call["seq"] == p["call"]:
            call.update(status=p["status"], output=p.get("output", ""), decision=p.get("decision"),
                        reason=p.get("reason"))  # fmt: skip
            approved = state.approved_calls.get(node.agent)
            if approved and p.get("decision") == "/permit":
                used = next((a for a in approved if a.digest == tool_call_digest(call)), None)
                if used is not None:
                    approved.remove(used)  # the approval was used
            return


def _count_usage(state: RunState, event: ev.Event) -> None:
    """An attempt-ending event carries what the attempt cost; the run's totals are their sum."""
    add_usage(state.usage, event.payload)


def add_usage(totals: dict[str, float], payload: dict[str, Any]) -> None:
    """Add what an event's payload says its attempt cost (if it says) to ``totals`` (a run's usage keys)."""
    usage = payload.get("usage")
    if isinstance(usage, dict):
        for key in totals:
            totals[key] += float(usage.get(key) or 0)


def _remembered(state: RunState, event: ev.Event) -> None:
    """The run's notes after the attempt's memory operations: a note sets its key; forgetting it or promoting it to
    long-term memory takes it out of the run's working memory."""
    for op in event.payload.get("memory") or []:
        if op.get("op") == "note":
            state.notes[str(op["key"])] = str(op.get("value", ""))
        elif op.get("op") in ("forget", "promote_to_long_term"):
            state.notes.pop(str(op["key"]), None)


def _completed(state: RunState, event: ev.Event, node: Invocation | None) -> None:
    _count_usage(state, event)
    _remembered(state, event)
    if node is not None:
        p = event.payload
        node.output, node.status_tag, node.thinking = p["output"], p.get("status_tag"), p.get("thinking", "")


def _failed(state: RunState, event: ev.Event, node: Invocation | None) -> None:
    _count_usage(state, event)
    if node is not None:
        node.error, node.output = event.payload.get("error"), event.payload.get("output", node.output)


def _approval_requested(state: RunState, event: ev.Event, node: Invocation | None) -> None:
    _count_usage(state, event)
    p = event.payload
    others = [r["reason"] for r in p.get("reasons", []) if r["reason"] != p["reason"]]
    shown = [(str(r["category"]), str(r["reason"])) for r in p.get("reasons", [])] or [(p["category"], p["reason"])]
    state.pauses.append(Pause(event.agent, p["category"], p["reason"], p.get("hint", ""), event.seq, others,
                              p.get("held_call"), shown, event.at, p.get("why")))  # fmt: skip
    if node is not None:
        node.output = p.get("output", node.output)
        node.thinking = p.get("thinking", node.thinking)


def _approval_decided(state: RunState, event: ev.Event, node: Invocation | None) -> None:
    p = event.payload
    decided = next((x for x in state.pauses if x.seq == p["pause"]), None)
    if decided is not None and decided.held_call is not None and p["decision"] == "retry" and node is not None:
        held = next((c for c in node.tools if c["seq"] == decided.held_call), None)
        if held is not None:  # the operator saw this exact call and let the agent go on: it may run, once
            approved = ApprovedCall(tool_call_digest(held), decided.approvals)
            state.approved_calls.setdefault(node.agent, []).append(approved)
    state.pauses = [x for x in state.pauses if x.seq != p["pause"]]
    state.decided[p["pause"]] = f"{p['decision']} by {event.actor} at {event.at:%Y-%m-%d %H:%M:%S} UTC"
    if node is not None and p["decision"] == "retry" and p.get("instructions"):
        node.instructions = p["instructions"]
    if not state.pauses and p["decision"] in ("retry", "skip"):
        state.status = RunStatus.RUNNING  # the last pause decided: the run goes on


def _outcome(key: str) -> Callable[[RunState, ev.Event, Invocation | None], None]:
    def record(state: RunState, event: ev.Event, _node: Invocation | None) -> None:
        state.outcome = event.payload.get(key)

    return record


def _aborted(state: RunState, event: ev.Event, node: Invocation | None) -> None:
    """The run ends: its reason is the outcome, and the pauses still open are closed with it."""
    _outcome("reason")(state, event, node)
    for pause in state.pauses:
        when = f"{event.at:%Y-%m-%d %H:%M:%S} UTC"
        state.decided[pause.seq] = f"closed when the run was aborted by {event.actor} at {when}"
    state.pauses = []


_RECORDS: dict[str, Callable[[RunState, ev.Event, Invocation | None], None]] = {
    ev.RUN_CREATED: _created,
    ev.NODE_CREATED: _node_created,
    ev.RUN_STARTED: _restarted,
    ev.RUN_RESUMED: _restarted,
    ev.AGENT_STARTED: _started,
    ev.TOOL_CALL: _tool_call,
    ev.TOOL_RESULT: _tool_result,
    ev.AGENT_COMPLETED: _completed,
    ev.AGENT_FAILED: _failed,
    ev.APPROVAL_REQUESTED: _approval_requested,
    ev.APPROVAL_DECIDED: _approval_decided,
    ev.RUN_COMPLETED: _outcome("summary"),
    ev.RUN_FAILED: _outcome("error"),
    ev.RUN_ABORTED: _aborted,
    ev.POLICY_REPINNED: _repinned,
}
