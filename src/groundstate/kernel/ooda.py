"""The OODA system shards around one ActionID envelope.

perception: control packet → ``user_intent(/current_intent, ...)``, confidence, focus, accepted updates
executive: derived ``next_action/4`` → ``pending_action/5`` (one fresh ActionID each)
constitution: policy rules → ``permission_check_result/4`` (no Python decides a permission)
router: derived ``route_for/2`` → virtual store → ``routing_result/4`` and ``execution_result/5``

Every stage writes facts in one transaction, so ``current_ooda_phase/1`` always describes what is true.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import InputError
from ..logic import Float, Name
from ..packets import ACCEPTED, ControlPacket, GateResult, PacketResult, ToolRequest, tool_requests
from .config import ShardProfile
from .executors import Action, Outcome
from .journaled import JournaledEffects
from .kernel import Kernel, Transaction, name
from .memory import Memory
from .metrics import Metrics
from .retention import ColdStorage, compact, next_number
from .store import VirtualStore
from .workspace import INVALID, OUTSIDE

CURRENT = Name("/current_intent")
_ACTION_TYPE = re.compile(r"/[A-Za-z_][A-Za-z0-9_]*")
_STALE = (
    "user_intent(/current_intent, _, _, _, _)",
    "intent_confidence(/current_intent, _)",
    "processed_intent(/current_intent)",
    "executive_processed_intent(/current_intent)",
    "focus_resolution(/current_intent, _, _, _)",
    "model_requests_approval(/current_intent)",
    "current_time(_)",
    "requested_action(_, _, _, _)",
    "request_consumed(_)",
    "request_approved(_)",
)


ARGUMENT_IS_PAYLOAD = ("execute_python",)  # tools whose argument is their payload (the code), not a target


@dataclass(frozen=True)
class Request:
    """A tool call the model made: it becomes ``requested_action/4``; policy decides the rest."""

    type: str  # a name constant: "/read_file" (always with the leading slash, like every name in the kernel)
    target: str = ""
    payload: str = ""
    operator_approved: bool = False  # an operator approved this exact call (``request_approved``): set by the runtime

    def __post_init__(self) -> None:
        if not _ACTION_TYPE.fullmatch(self.type):
            raise PacketRefused(f"a request's type is a name like /read_file, got {self.type!r}")

    @classmethod
    def of(cls, request: ToolRequest) -> Request:
        """The request as the kernel sees it: ``execute_python``'s argument is its code, others' a target."""
        if request.name in ARGUMENT_IS_PAYLOAD and not request.content:
            return cls("/" + request.name, "", request.argument)
        return cls("/" + request.name, request.argument, request.content)


@dataclass
class ActionReport:
    """What became of one requested action: the decision and its reason, and the executor's status and output."""

    action_id: str
    type: str
    target: str
    payload: str
    decision: str  # /permit or /deny
    reason: str
    executor: str | None = None
    source: str = ""  # /current_intent or the /request/N this action answers
    status: str | None = None  # /success or /failure once executed
    output: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The report as printed by ``groundstate kernel step``."""
        return asdict(self)


class NotAwaitingApproval(InputError, ValueError):
    """An approval for an action that is not waiting for one (unknown, already approved, or never held)."""


class PacketRefused(InputError, ValueError):
    """A packet the kernel will not take: rejected by the parser, or with malformed tool requests."""


class Shards:
    """Perception, executive and router for one kernel and virtual store."""

    def __init__(
        self,
        kernel: Kernel,
        store: VirtualStore,
        cold: ColdStorage | None = None,
        memory: Memory | None = None,
        metrics: Metrics | None = None,
        shard_type: str | None = None,
        journal: JournaledEffects | None = None,
    ) -> None:
        self.kernel = kernel
        self.journal = journal  # with a journal, every executor call is journaled before and after it runs
        self.replayed: set[str] = set()  # actions whose result came from the journal (nothing ran)
        self.metrics = metrics or Metrics()
        kernel.after_evaluation.append(self._observed)
        self.store = store
        self.memory = memory
        if memory is not None:
            memory.attach(kernel)
        self.cold = cold  # with cold storage, settled envelopes beyond core_limits.max_action_log are archived
        self._ids = itertools.count(next_number(kernel, cold))
        self._requests = itertools.count(1)
        self.request_ids: list[str] = []  # the last turn's requests, in order, as their action_source names
        self.shard_type = shard_type or "main"  # whose profile's limits executors run under
        self.fixed_shard_type = shard_type is not None  # given by the caller: a packet cannot choose other limits

    # -- observe ------------------------------------------------------------------------------------
    def perceive(self, result: PacketResult, requests: Iterable[Request] | None = None) -> None:
        """A new turn: stale turn facts go, the packet's facts come, in one transaction. ``requests`` default to the
        packet's own ``tool_requests`` (a malformed entry refuses the whole turn: nothing is half-done)."""
        if result.packet is None:
            self.metrics.validation_failures.labels("rejected").inc()
            raise PacketRefused("a rejected packet never reaches the kernel: " + "; ".join(result.errors))
        packet = result.packet
        if requests is None:
            requests = self._requests_of(packet)
        self._count(result)
        if not self.fixed_shard_type and packet.execution_metadata is not None and packet.execution_metadata.shard_type:
            self.shard_type = packet.execution_metadata.shard_type
        if self.memory is not None:  # the stores first: this turn's evaluation already sees them
            self.memory.commit(packet.memory_operations)
        with self.kernel.transaction() as tx:
            for pattern in _STALE:
                self.kernel.retract_matching(tx, pattern)
            self._assert_turn(tx, result, packet)
            self.request_ids = []
            for request in requests:
                request_id = Name(f"/request/{next(self._requests)}")
                self.request_ids.append(str(request_id))
                tx.assert_("requested_action", (request_id, Name(request.type), request.target, request.payload))
                if request.operator_approved:
                    tx.assert_("request_approved", (request_id,))
            if self.memory is not None:
                self.memory.stage(self.kernel, tx, packet.memory_operations)

    def _requests_of(self, packet: ControlPacket) -> list[Request]:
        """The packet's own tool requests; a malformed one refuses the whole turn."""
        valid, problems = tool_requests(packet)
        if problems:
            self.metrics.validation_failures.labels("tool_request").inc(len(problems))
            raise PacketRefused("malformed tool requests: " + "; ".join(problems))
        return [Request.of(r) for r in valid]

    def _count(self, result: PacketResult) -> None:
        """What the metrics record of a validated packet: its confidence, a fallback extraction, dropped updates."""
        assert result.packet is not None
        self.metrics.confidence.observe(result.packet.intent_classification.confidence)
        if result.source in ("fenced", "embedded"):
            self.metrics.stream_fallbacks.labels(result.source).inc()
        if result.dropped_updates:
            self.metrics.validation_failures.labels("dropped_update").inc(len(result.dropped_updates))

    def _assert_turn(self, tx: Transaction, result: PacketResult, packet: ControlPacket) -> None:
        """The turn's facts: the intent, its confidence and focus, the time, an approval request, the updates."""
        intent = packet.intent_classification
        intent_row = (CURRENT, name(intent.category), name(intent.verb), intent.target, intent.constraint)
        tx.assert_("user_intent", intent_row)
        tx.assert_("intent_confidence", (CURRENT, Float(intent.confidence)))
        tx.assert_("processed_intent", (CURRENT,))
        tx.assert_("focus_resolution", (CURRENT, intent.target, *self._focus(intent.target)))
        tx.assert_("current_time", (self.kernel.now_ms(),))
        if packet.safety_gates is not None and packet.safety_gates.requires_user_approval:
            tx.assert_("model_requests_approval", (CURRENT,))
        for update in result.accepted_updates:
            tx.assert_(update.predicate, update.fact)

    def _focus(self, target: str) -> tuple[str, Name]:
        if target in ("", "codebase"):
            return ".", Name("/codebase")
        kind = self.kernel.workspace.kind(target)  # never raises, whatever the model wrote
        if kind in (OUTSIDE, INVALID):
            return "", Name("/outside")
        resolved = "/".join(self.kernel.workspace.parts(target)) or "."
        return resolved, Name({"file": "/file", "directory": "/directory"}.get(kind, "/missing"))

    # -- decide -------------------------------------------------------------------------------------
    def decide(self) -> list[str]:
        """Each derived next_action becomes a pending action with a fresh ActionID; returns the IDs."""
        now = self.kernel.now_ms()
        created: list[str] = []
        with self.kernel.transaction() as tx:
            for source, action_type, target, payload in self.kernel.query("next_action(S, T, Target, P)"):
                action_id = Name(f"/action/{next(self._ids)}")
                tx.assert_("pending_action", (action_id, action_type, target, payload, now))
                tx.assert_("action_source", (action_id, source))
                created.append(str(action_id))
                if source == CURRENT:
                    tx.assert_("executive_processed_intent", (CURRENT,))
                else:
                    tx.assert_("request_consumed", (source,))
            if self.kernel.holds("pending_intent(/current_intent)"):
                tx.assert_("executive_processed_intent", (CURRENT,))  # seen, even when nothing follows
        return created

    # -- act ----------------------------------------------------------------------------------------
    def act(self) -> list[str]:
        """Route every permitted, unrouted action through the virtual store; returns the IDs handled."""
        handled: list[str] = []
        profile = self.kernel.config.shard(self.shard_type)
        for (action_id,) in self.kernel.query("awaiting_routing(A)"):
            _, action_type, target, payload, _ = self.kernel.match("pending_action", action_id, sort=True)[0]
            routes = self.kernel.match("chosen_route", action_id, sort=True)  # one, or none (routing_problem)
            with self.kernel.transaction() as tx:
                now = self.kernel.now_ms()
                if not routes:
                    problems = self.kernel.match("routing_problem", action_id, sort=True)
                    reason = "; ".join(r for _, r in problems) or f"no route for {action_type}"
                    tx.assert_("routing_result", (action_id, Name("/failure"), reason, now))
                    tx.assert_("routing_error", (action_id, action_type, reason))
                    self.metrics.routing_errors.labels(str(action_type)).inc()
                else:
                    [(_, canonical, route)] = routes
                    executor, kind = str(route).lstrip("/"), str(canonical).lstrip("/")
                    permits = self.kernel.match("permission_check_result", action_id, Name("/permit"), sort=True)
                    [(_, _, reason, _)] = permits
                    tx.assert_("permit_record", (action_id, reason, now))
                    outcome = self._execute(executor, Action(str(action_id), kind, target, payload), profile)
                    status = Name("/success" if outcome.ok else "/failure")
                    self.metrics.executed(str(action_type), executor, outcome.ok)
                    tx.assert_("routing_result", (action_id, Name("/success"), "/" + executor, now))
                    tx.assert_("execution_result", (action_id, action_type, status, outcome.output, now))
                    for predicate, row in outcome.facts:
                        tx.assert_(predicate, row)
            handled.append(str(action_id))
        return handled

    def _execute(self, executor: str, action: Action, profile: ShardProfile) -> Outcome:
        """Run the action in the virtual store — through the journal when there is one."""
        if self.journal is None:
            return self.store.run(executor, action, profile)
        outcome = self.journal.run(self.store, executor, action, profile)
        if outcome.replayed:
            self.replayed.add(action.action_id)
        return outcome

    def retain(self) -> int:
        """Retention: with cold storage, settled envelopes beyond ``core_limits.max_action_log`` move there (after
        the turn's reports are made, so a turn that settles more actions than the bound still reports each)."""
        return compact(self.kernel, self.cold) if self.cold is not None else 0

    def approve(self, action_id: str) -> None:
        """The user approved an action that required approval; the policy now decides again."""
        if not self.kernel.match("awaiting_approval", Name(action_id)):
            raise NotAwaitingApproval(f"{action_id} is not awaiting approval")
        self.kernel.assert_facts("user_approved", (Name(action_id),))

    # -- one turn -----------------------------------------------------------------------------------
    def step(self, result: PacketResult, requests: Iterable[Request] | None = None) -> list[ActionReport]:
        """One turn: perceive the packet, let the policy decide each request, run what is permitted, report."""
        self.perceive(result, requests)
        created = self.decide()
        self.act()
        reports = [self.report(action_id) for action_id in created]
        self.retain()
        return reports

    def step_gated(self, gated: GateResult, requests: Iterable[Request] | None = None) -> list[ActionReport]:
        """A turn from the streaming gate: an aborted stream changes nothing."""
        if gated.decision != ACCEPTED or gated.packet is None:
            self.metrics.stream_aborts.inc()
            return []
        return self.step(gated.packet, requests)

    def _observed(self) -> None:
        k = self.kernel
        self.metrics.evaluated(k.last_stats.seconds, k.fact_count(), k.derived_count())
        self.metrics.in_phase(k.phase())

    def report(self, action_id: str) -> ActionReport:
        """The report of an action by id (archived actions included)."""
        k, key = self.kernel, Name(str(action_id))  # the id as the rules hold it (a name), never as pattern text
        _, action_type, target, payload, _ = k.match("pending_action", key, sort=True)[0]
        decision, reason = k.final_decision(action_id)
        report = ActionReport(action_id, str(action_type), target, payload, decision, reason)
        report.source = next((str(source) for _, source in k.match("action_source", key, sort=True)), "")
        for _, status, details, _ in k.match("routing_result", key, sort=True):
            report.executor = details if status == Name("/success") else None
            if status == Name("/failure"):
                report.status, report.output = "/failure", details
        for _, _, status, output, _ in k.match("execution_result", key, sort=True):
            report.status, report.output = str(status), output
        report.warnings = [message for _, message in k.match("chesterton_fence_warning", key, sort=True)]
        return report
