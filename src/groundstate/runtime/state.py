"""A run's state, derived from its events and from nothing else (so a restart rebuilds it exactly).

Theory of operation
-------------------
Two state machines read the same event log. The run's status (``RunStatus``) moves along ``RUN_EDGES``: for each
status, the events that may follow it and the status each leads to. Each agent's invocation (``NodeStatus``) moves
along ``NODE_EDGES`` on the events that name it; a decision is keyed with its verdict (``(ApprovalDecided, "retry")``),
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

_AGENT_WORK: tuple[type[ev.EventBody], ...] = (ev.NodeCreated, ev.AgentStarted, ev.ToolCall, ev.ToolResult,
                                                ev.AgentCompleted, ev.AgentFailed, ev.AgentSkipped)  # fmt: skip
Edges = dict[type[ev.EventBody], RunStatus]
_ALONGSIDE: tuple[type[ev.EventBody], ...] = (*_AGENT_WORK, ev.ShadowDisagreed)
_STAYS_RUNNING: Edges = {event: RunStatus.RUNNING for event in _ALONGSIDE}
_STAYS_AWAITING: Edges = {event: RunStatus.AWAITING_APPROVAL for event in _ALONGSIDE}  # others go on
_ENDINGS: Edges = {ev.RunFailed: RunStatus.FAILED, ev.RunAborted: RunStatus.ABORTED}

RUN_EDGES: dict[RunStatus, Edges] = {
    RunStatus.PENDING: {
        ev.RunCreated: RunStatus.PENDING, ev.NodeCreated: RunStatus.PENDING, ev.RunStarted: RunStatus.RUNNING,
        ev.PolicyRepinned: RunStatus.PENDING, **_ENDINGS,
    },
    RunStatus.RUNNING: {
        **_STAYS_RUNNING, ev.RunResumed: RunStatus.RUNNING, ev.ApprovalRequested: RunStatus.AWAITING_APPROVAL,
        ev.RunCompleted: RunStatus.COMPLETED, **_ENDINGS,
    },
    RunStatus.AWAITING_APPROVAL: {
        **_STAYS_AWAITING, ev.ApprovalRequested: RunStatus.AWAITING_APPROVAL,
        ev.ApprovalDecided: RunStatus.AWAITING_APPROVAL, ev.PolicyRepinned: RunStatus.AWAITING_APPROVAL, **_ENDINGS,
    },
    RunStatus.FAILED: {ev.RunResumed: RunStatus.RUNNING, ev.PolicyRepinned: RunStatus.FAILED},
    RunStatus.COMPLETED: {},
    RunStatus.ABORTED: {},
}  # fmt: skip

NodeEdge = type[ev.EventBody] | tuple[type[ev.ApprovalDecided], str]  # a decision is keyed with its verdict
NODE_EDGES: dict[NodeStatus, dict[NodeEdge, NodeStatus]] = {
    NodeStatus.PENDING: {
        ev.AgentStarted: NodeStatus.RUNNING, ev.ApprovalRequested: NodeStatus.PAUSED,  # a pre-flight pause
        ev.AgentSkipped: NodeStatus.SKIPPED, ev.AgentFailed: NodeStatus.FAILED,
    },
    NodeStatus.RUNNING: {
        ev.ToolCall: NodeStatus.RUNNING, ev.ToolResult: NodeStatus.RUNNING, ev.AgentCompleted: NodeStatus.SUCCEEDED,
        ev.AgentFailed: NodeStatus.FAILED, ev.ApprovalRequested: NodeStatus.PAUSED,
    },
    NodeStatus.PAUSED: {
        (ev.ApprovalDecided, "retry"): NodeStatus.PENDING, (ev.ApprovalDecided, "skip"): NodeStatus.PAUSED,
        (ev.ApprovalDecided, "abort"): NodeStatus.PAUSED, ev.AgentSkipped: NodeStatus.SKIPPED,
    },
    NodeStatus.FAILED: {ev.ApprovalRequested: NodeStatus.PAUSED},  # the breaker after a hard error
    NodeStatus.SUCCEEDED: {},
    NodeStatus.SKIPPED: {},
}  # fmt: skip
_AGENTS_OWN = frozenset({ev.AgentStarted, ev.ToolCall, ev.ToolResult, ev.AgentCompleted, ev.AgentFailed,
                         ev.AgentSkipped})  # an agent's own events: they name one of the run's agents
_NODE_EVENTS = frozenset(key[0] if isinstance(key, tuple) else key for row in NODE_EDGES.values() for key in row)


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
    grants: dict[str, str] = field(default_factory=dict)  # endpoint -> the grant that proves it (backends.grant_of)
    created_by: str = ""  # who started the run, as its RunCreated event names them (operator:NAME, runtime, ...)
    status: RunStatus = RunStatus.PENDING
    nodes: dict[str, Invocation] = field(default_factory=dict)
    spawned: list[dict[str, Any]] = field(default_factory=list)  # agents added by cortex patterns
    pauses: list[Pause] = field(default_factory=list)  # approvals waiting, oldest first
    last_seq: int = 0
    outcome: str | dict[str, str] | None = None  # the summary a completed run ends with, else why it ended
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

    def admit(self, body: ev.EventBody, agent: str | None = None) -> None:
        """Refuse (EventRefused) an event that has no edge from the current statuses; return if it may follow."""
        kind = type(body)
        if kind not in RUN_EDGES[self.status]:
            if self.status in FINISHED:
                raise RunEnded(f"run {self.run_id} has ended ({self.status}); no {kind.NAME} event can follow")
            raise EventRefused(f"run {self.run_id} is {self.status}: no {kind.NAME} event can follow")
        node = self.nodes.get(agent or "")
        if node is None and kind in _AGENTS_OWN:
            raise EventRefused(f"run {self.run_id}: a {kind.NAME} event names no agent of the run ({agent!r})")
        if node is not None and kind in _NODE_EVENTS and _node_key(body) not in NODE_EDGES[node.status]:
            raise EventRefused(f"agent {agent} of run {self.run_id} is {node.status}: no {kind.NAME} can follow")
        if isinstance(body, ev.ApprovalDecided) and body.pause not in [x.seq for x in self.pauses]:
            raise EventRefused(f"run {self.run_id}: the decision answers no waiting pause")
        for restarted in body.restarted if isinstance(body, ev.RunResumed) else []:
            if getattr(self.nodes.get(restarted), "status", None) != NodeStatus.RUNNING:
                raise EventRefused(f"run {self.run_id}: {restarted} was not running, so it cannot be restarted")

    def apply(self, event: ev.Event) -> None:
        """Move both machines along the event (refused with EventRefused if it has no edge)."""
        body = event.body
        self.admit(body, event.agent)
        before = self.status
        node = self.nodes.get(event.agent or "")
        self.last_seq = event.seq
        self.status = RUN_EDGES[self.status][type(body)]
        if node is not None and type(body) in _NODE_EVENTS:
            node.status = NODE_EDGES[node.status][_node_key(body)]
        _record(self, event, node)
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


def _node_key(body: ev.EventBody) -> NodeEdge:
    if isinstance(body, ev.ApprovalDecided):
        return (ev.ApprovalDecided, body.decision)
    return type(body)


# -- what each event records beside the statuses ---------------------------------------------------------------
def _record(state: RunState, event: ev.Event, node: Invocation | None) -> None:
    """The event's action on the run beyond the statuses, by its type (each action reads its body's typed fields);
    an agent's attempt's events go on to ``_record_attempt``."""
    match event.body:
        case ev.RunCreated() as created:
            _created(state, created, event.actor)
        case ev.PolicyRepinned(policy=policy):
            state.policy = policy
        case ev.NodeCreated() as joined:
            state.nodes[joined.agent] = Invocation(joined.agent)
            if joined.spec:
                state.spawned.append(joined.spec)
        case ev.RunResumed(restarted=restarted):
            for agent in restarted:  # interrupted mid-invocation: it runs again
                state.nodes[agent].status = NodeStatus.PENDING
                state.nodes[agent].interrupted = True
        case ev.ApprovalDecided() as decided:
            _approval_decided(state, event, node, decided)
        case ev.RunCompleted(summary=summary):
            state.outcome = summary
        case ev.RunFailed(error=error):
            state.outcome = error
        case ev.RunAborted() as aborted:
            _aborted(state, event, aborted)
        case _:
            _record_attempt(state, event, node)


def _record_attempt(state: RunState, event: ev.Event, node: Invocation | None) -> None:
    """What an event of an agent's attempt records on its invocation (and on the run's usage)."""
    match event.body:
        case ev.AgentStarted() as started:
            _started(node, started)
        case ev.ToolCall() as call:
            if node is not None:
                node.tools.append({"seq": event.seq, "tool": call.tool, "target": call.target,
                                   "payload": call.payload})  # fmt: skip
        case ev.ToolResult() as result:
            _tool_result(state, node, result)
        case ev.AgentCompleted() as completed:
            _completed(state, node, completed)
        case ev.AgentFailed() as failed:
            add_usage(state.usage, failed.usage)
            if node is not None:
                node.error = failed.error
                node.output = failed.output if "output" in failed.model_fields_set else node.output
        case ev.ApprovalRequested() as requested:
            _approval_requested(state, event, node, requested)
        case _:
            pass  # RunStarted, AgentSkipped, ShadowDisagreed: the statuses say it all


def _created(state: RunState, created: ev.RunCreated, actor: str) -> None:
    state.workflow, state.name, state.model = created.workflow, created.name, created.model
    state.policy = created.policy
    state.models = dict(created.models)
    state.budgets = dict(created.budgets)
    state.fallback = list(created.fallback)
    state.credentials = list(created.credentials)
    state.grants = dict(created.grants)
    state.prices = {model: dict(price) for model, price in created.prices.items()}
    state.created_by = actor


def _started(node: Invocation | None, started: ev.AgentStarted) -> None:
    if node is not None:
        node.attempts, node.tools, node.error = started.attempt, [], None
        node.journal_epoch = started.journal if started.journal is not None else started.attempt  # before the journal
        node.interrupted = False


def tool_call_digest(call: dict[str, Any]) -> str:
    """The digest of a tool call as the model made it (tool, target, payload): what an approval is bound to."""
    return call_digest(str(call["tool"]), {"target": call.get("target", ""), "payload": call.get("payload", "")})


def _tool_result(state: RunState, node: Invocation | None, result: ev.ToolResult) -> None:
    if node is None:
        return
    for call in reversed(node.tools):  # a result follows its call closely: looked for from the newest (seqs are unique)
        if call["seq"] == result.call:
            call.update(status=result.status, output=result.output, decision=result.decision, reason=result.reason)
            approved = state.approved_calls.get(node.agent)
            if approved and result.decision == "/permit":
                used = next((a for a in approved if a.digest == tool_call_digest(call)), None)
                if used is not None:
                    approved.remove(used)  # the approval was used
            return


def add_usage(totals: dict[str, float], usage: ev.Usage | None) -> None:
    """Add what an attempt cost (if its event says) to ``totals`` (a run's usage keys)."""
    if usage:
        for key in totals:
            totals[key] += float(usage.get(key) or 0)


def _completed(state: RunState, node: Invocation | None, completed: ev.AgentCompleted) -> None:
    add_usage(state.usage, completed.usage)
    for op in completed.memory:  # the run's notes: a note sets its key; forgetting it or promoting it to long-term
        if op.get("op") == "note":  # memory takes it out of the run's working memory
            state.notes[str(op["key"])] = str(op.get("value", ""))
        elif op.get("op") in ("forget", "promote_to_long_term"):
            state.notes.pop(str(op["key"]), None)
    if node is not None:
        node.output, node.status_tag, node.thinking = completed.output, completed.status_tag, completed.thinking


def _approval_requested(
    state: RunState, event: ev.Event, node: Invocation | None, requested: ev.ApprovalRequested
) -> None:
    others = [r.reason for r in requested.reasons if r.reason != requested.reason]
    shown = [(r.category, r.reason) for r in requested.reasons] or [(requested.category, requested.reason)]
    state.pauses.append(Pause(event.agent, requested.category, requested.reason, requested.hint, event.seq, others,
                              requested.held_call, shown, event.at, requested.why))  # fmt: skip
    if node is not None:
        given = requested.model_fields_set
        node.output = requested.output if "output" in given else node.output
        node.thinking = requested.thinking if "thinking" in given else node.thinking


def _approval_decided(state: RunState, event: ev.Event, node: Invocation | None, decided: ev.ApprovalDecided) -> None:
    pause = next((x for x in state.pauses if x.seq == decided.pause), None)
    if pause is not None and pause.held_call is not None and decided.decision == "retry" and node is not None:
        held = next((c for c in node.tools if c["seq"] == pause.held_call), None)
        if held is not None:  # the operator saw this exact call and let the agent go on: it may run, once
            approved = ApprovedCall(tool_call_digest(held), pause.approvals)
            state.approved_calls.setdefault(node.agent, []).append(approved)
    state.pauses = [x for x in state.pauses if x.seq != decided.pause]
    state.decided[decided.pause] = f"{decided.decision} by {event.actor} at {event.at:%Y-%m-%d %H:%M:%S} UTC"
    if node is not None and decided.decision == "retry" and decided.instructions:
        node.instructions = decided.instructions
    if not state.pauses and decided.decision in ("retry", "skip"):
        state.status = RunStatus.RUNNING  # the last pause decided: the run goes on


def _aborted(state: RunState, event: ev.Event, aborted: ev.RunAborted) -> None:
    """The run ends: its reason is the outcome, and the pauses still open are closed with it."""
    state.outcome = aborted.reason
    for pause in state.pauses:
        when = f"{event.at:%Y-%m-%d %H:%M:%S} UTC"
        state.decided[pause.seq] = f"closed when the run was aborted by {event.actor} at {when}"
    state.pauses = []
