"""The RARO runtime: runs workflow DAGs, consults the guard kernel at every checkpoint, pauses for the operator.

Every state change is an event in the store first; the in-memory view is always rebuilt from the log, so a
process killed mid-run resumes exactly: agents that completed are not run again, an agent that was interrupted
mid-conversation runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import tools as python_tools
from .. import tracing
from ..config import Price, ProjectConfig
from ..errors import StoreError
from ..kernel import (
    KernelConfig,
    Metrics,
    configured_search,
    count_completed_run,
)
from ..store import ToolJournal, this_process
from . import run_events as ev
from .attempt import MAX_ERROR_CHARS, Attempts
from .backends import Backend, check_model_spec, make_backend, origin_of
from .conversation import ModelRounds
from .cortex import load_patterns
from .decisions import (
    DecisionError,
    Planned,
    check_decision,
    decision_events,
    repin_events,
)
from .flows import RunFlows, natures
from .guards import guard_rules
from .mcp_tools import McpTools
from .metrics import RunMetrics
from .notify import Webhook
from .policy import PinnedPolicy
from .recordings import RunRecording
from .reported import ReportedGuards
from .run_context import RunContext
from .run_log import RunLog
from .run_memory import open_memory
from .state import (
    AWAITING_APPROVAL,
    FAILED,
    PENDING,
    RUNNING,
    SETTLED,
    TERMINAL,
    NodeStatus,
    RunEnded,
    RunState,
)
from .store import EventStore, LeaseHeld, LeaseLost
from .timeouts import ACTOR as TIMEOUT_ACTOR
from .timeouts import expired
from .tool_round import ToolRound
from .workflow import (
    AgentSpec,
    Role,
    Workflow,
    WorkflowError,
    agent_tool_name,
    is_mcp_tool,
    parse_workflow,
    workflow_of,
)


class Runtime:
    """Creates, drives and resumes runs of workflows; every effect goes through the event store."""

    def __init__(
        self,
        store: EventStore,
        home: Path,
        *,
        backend: Backend | None = None,
        backend_factory: Callable[[str], Backend] = make_backend,
        concurrency: int = 4,
        patterns_path: Path | None = None,
        max_rounds: int = 3,
        search: Any = None,
        config: KernelConfig | None = None,
        lease_seconds: float = 30.0,
        settings: ProjectConfig | None = None,
    ) -> None:
        self.store = store
        self.lease_seconds = lease_seconds  # a crashed driver's run can be taken over this long after its last renewal
        self.settings = settings or ProjectConfig()  # the project configuration (groundstate.toml)
        self.config = config or self.settings.limits  # shard profiles bound each agent's prompt and model calls
        self.home = home
        self.runs_dir = self.settings.executor.runs_dir or home / "runs"  # each run's workspace and recordings
        self.node = socket.gethostname()  # names this process's driver in leases and RunStarted/RunResumed
        self._backend = backend
        self._backend_factory = backend_factory
        self.concurrency = concurrency  # at most core_limits.max_concurrent_shards (see _schedule)
        pattern_files = [*([patterns_path] if patterns_path else []), *self.settings.policy.patterns]
        guards = guard_rules(self.settings.policy.guards, self.settings.policy.disable_guards)
        # [policy] shadow: a candidate's guard rules, decided beside every run this process drives (runtime/shadow.py)
        self.shadow_guards = guard_rules(self.settings.policy.shadow, self.settings.policy.disable_guards) \
            if self.settings.policy.shadow else None  # fmt: skip
        roles = [Role(prefix=prefix, **role.model_dump()) for prefix, role in self.settings.roles.items()] or None
        patterns = load_patterns(*pattern_files, disabled=self.settings.policy.disable_patterns)
        self.policy = PinnedPolicy.of(guards, patterns, roles, self.config)  # what new runs are pinned to
        self.metrics = Metrics()  # the kernel's, shared by every agent's shards
        self.run_metrics = RunMetrics(self.metrics)  # the runtime's, in the same registry
        self.max_rounds = max_rounds
        self.search = search or configured_search(self.settings.search)  # what web_search searches
        self.memory = open_memory(self.settings.memory, store.engine)  # agents' long-term and vector memory
        if store.audit_key is None:  # [audit] sign: run heads and the store's chain signed with the operator's key
            store.audit_key = self.settings.audit.key()
        self.journal = ToolJournal(store.url, audit_key=store.audit_key)  # every tool call: intent, then result
        self._mcp: McpTools | None = None  # the MCP servers workflow agents' tools come from, once needed
        if self.settings.tools.modules:  # your own Python tools, registered as their modules are imported
            python_tools.load_modules(self.settings.tools.modules, self.settings.tools.path)
        self.attempts = Attempts(self)  # one attempt of one agent (runtime/attempt.py)
        self.tool_round = ToolRound(store, self.journal, self.search, self.metrics, self.settings.learned,
                                    self.attempts.request_approval, self.attempts.cortex_actions)  # fmt: skip
        self.listeners: list[Callable[[ev.Event], None]] = []
        self.notifier = Webhook.configured(self.settings.notify, lambda run_id: self.store.state(run_id).name,
                                           store.engine)  # fmt: skip
        if self.notifier is not None:  # [notify] webhook: told of pauses, completions, failures, aborts
            self.listeners.append(self.notifier)
            self.notifier.resume()  # what a stopped process left unsent

    def close(self, timeout: float = 30.0) -> None:
        """Before the process exits: wait (up to ``timeout`` seconds) for notifications still being delivered."""
        if self.notifier is not None:
            self.notifier.flush(timeout)

    @property
    def roles(self) -> list[Role] | None:
        """The configuration's roles, for workflows that declare none (None: the shipped default roles)."""
        return list(self.policy.roles) if self.policy.roles is not None else None

    # -- starting --------------------------------------------------------------------------------------
    def create(
        self,
        workflow_text: str,
        source: str = "<workflow>",
        model: str | None = None,
        actor: str = "runtime",
        *,
        model_is_operators: bool = True,
    ) -> str:
        """Create a run of ``workflow_text`` (WorkflowError if it is invalid); returns its id. Nothing runs yet.
        ``model`` is the run's model (default: the configuration's ``models.default``, else ``local``); ``actor``:
        who created it (an operator's ``operator:NAME``), recorded on RunCreated. ``model_is_operators`` (the
        default: the caller is the operator's own command line or code): ``model``'s endpoint may receive
        ``GROUNDSTATE_API_KEY``; False (an account's request over HTTP): every model URL the run would call must be
        one the configuration names — the console host sends no request to an address a request body chose."""
        workflow = parse_workflow(workflow_text, source, roles=self.roles)
        servers = {tool[4:].split("/")[0] for spec in workflow.agents for tool in spec.tools if is_mcp_tool(tool)}
        unknown = sorted(servers - set(self.settings.mcp.servers))
        if unknown:
            raise WorkflowError(source, [f"mcp:{name}/...: the configuration has no [mcp.servers.{name}]"
                                         for name in unknown])  # fmt: skip
        model = model or self.settings.models.default or "local"
        models = self._configured_models(workflow)
        if self._backend_factory is make_backend:  # refuse a bad spec now, not as a failed run
            named = [model] if self._backend is None else []
            fallback = self.settings.models.fallback
            for spec in [*named, workflow.model, *(a.model for a in workflow.agents), *models.values(), *fallback]:
                if spec is not None:
                    check_model_spec(spec)
        if not model_is_operators:
            self._refuse_unconfigured_urls(source, [model, workflow.model, *(a.model for a in workflow.agents)])
        own = origin_of(model) if model_is_operators else None
        budgets = self.settings.budgets.model_dump(exclude_none=True)
        run_id = self.store.create_run(workflow.name, workflow_text, model, actor=actor, policy=self.policy.to_json(),
                                       models=models, budgets=budgets, credentials=[own] if own else [],
                                       fallback=list(self.settings.models.fallback),
                                       prices={m: p.model_dump() for m, p in self.settings.prices.items()})  # fmt: skip
        self.store.transact(run_id, lambda state: [(ev.NodeCreated(agent=a), None) for a in workflow.order()])
        self.run_metrics.observe(self.store.events(run_id)[0])
        return run_id

    # -- running ---------------------------------------------------------------------------------------
    async def drive(self, run_id: str, *, resume_failed: bool = False, take_over: bool = False) -> RunState:
        """Run until the run completes, fails, is aborted or waits for the operator. One driver per run: another
        process's live lease makes this raise LeaseHeld; a failed run continues only with ``resume_failed``.
        With ``take_over`` (a cluster's segment drivers), a lease another driver holds is waited out instead: if it
        lapses, this driver takes the run over; if its holder renews it, that one is alive and this returns."""
        state = self.store.state(run_id)
        if state.status in (*TERMINAL, AWAITING_APPROVAL) or (state.status == FAILED and not resume_failed):
            return state
        pid_and_start = this_process().split(":", 1)[1]  # with the node: a dead holder on this host is known dead
        holder = f"{self.node}:{pid_and_start}:{uuid.uuid4().hex[:8]}"
        if not await self._acquire(run_id, holder, take_over):
            return self.store.state(run_id)
        try:
            state = await self._drive(run_id, holder)
            self.run_metrics.segments.labels(state.status).inc()
            return state
        finally:
            with contextlib.suppress(StoreError):
                self.store.release_lease(run_id, holder)

    async def _acquire(self, run_id: str, holder: str, take_over: bool) -> bool:
        """The run's lease for ``holder``; False when another driver holds it and is alive (``take_over``)."""
        seen = None
        while True:
            try:
                self.store.acquire_lease(run_id, holder, self.lease_seconds)
                return True
            except LeaseHeld:
                if not take_over:
                    raise
            current = self.store.lease(run_id)
            if current is not None and seen is not None and current != seen:
                return False  # renewed (or taken) meanwhile: its driver is alive
            seen = current
            left = (current[1] - datetime.now(UTC)).total_seconds() if current is not None else 0.0
            await asyncio.sleep(min(max(left, 0.0) + 0.05, self.lease_seconds))

    async def _drive(self, run_id: str, holder: str) -> RunState:
        """One segment of the run, in a span of its own when tracing is on (its agents' attempts inside it)."""
        with tracing.span("run", {"groundstate.run.id": run_id, "gen_ai.conversation.id": run_id}) as current:
            state = await self._drive_segment(run_id, holder)
            tracing.note(current, groundstate__workflow=state.name, groundstate__status=str(state.status))
            return state

    async def _drive_segment(self, run_id: str, holder: str) -> RunState:
        state = self.store.state(run_id)
        try:
            ctx = self._context(run_id, state, holder)
        except Exception as exc:  # no model, unreadable workflow: the run cannot start or continue
            self._fail(run_id, holder, f"{type(exc).__name__}: {exc}")
            return self.store.state(run_id)
        tasks: dict[str, asyncio.Task[None]] = {}
        renewer = asyncio.create_task(self._renew(run_id, holder, tasks))
        try:
            if state.status == PENDING:
                ctx.log.emit(ev.RunStarted(model=state.model, driver=holder))
            else:
                restarted = [a for a, n in state.nodes.items() if n.status == NodeStatus.RUNNING]
                ctx.log.emit(ev.RunResumed(restarted=restarted, driver=holder))
                self.attempts.calls_in_doubt(ctx)
            await self._schedule(ctx, tasks)
            state = self.store.state(run_id)
            if state.status == RUNNING:
                done = all(n.status in SETTLED for n in state.nodes.values())
                if done:
                    summary = {a: n.status.value for a, n in state.nodes.items()}
                    learned = [{"rule": r.number, "remaining": r.remaining}
                               for r in count_completed_run(self.settings.learned.file())]  # fmt: skip
                    ctx.log.emit(ev.RunCompleted(summary=summary, learned=learned).leaving_out("learned"))
                else:
                    stuck = sorted(a for a, n in state.nodes.items() if n.status not in SETTLED)
                    ctx.log.emit(ev.RunFailed(error=f"agents that cannot proceed: {', '.join(stuck)}"))
        except (LeaseLost, RunEnded):
            pass  # another driver took the run over, or it ended meanwhile: this one writes nothing more
        except Exception as exc:  # the driver itself failed: the run says so and can be resumed, never left running
            self._fail(run_id, holder, f"the driver failed: {type(exc).__name__}: {exc}")
        finally:
            renewer.cancel()
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(renewer, *tasks.values(), return_exceptions=True)
            ctx.log.close()
            ctx.recording.close()
        return self.store.state(run_id)

    async def _schedule(self, ctx: RunContext, tasks: dict[str, asyncio.Task[None]]) -> None:
        semaphore = asyncio.Semaphore(min(self.concurrency, ctx.limits.core_limits.max_concurrent_shards))
        while True:
            state = self.store.state(ctx.run_id)
            if state.status == RUNNING:
                for agent in ctx.readiness.ready(ctx.workflow, state.nodes, tasks):
                    tasks[agent] = asyncio.create_task(self.attempts.run(ctx, agent, semaphore))
            running = [t for t in tasks.values() if not t.done()]
            if not running:
                break
            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in running:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]

    async def _renew(self, run_id: str, holder: str, tasks: dict[str, asyncio.Task[None]]) -> None:
        """Keep the lease while driving; if it was taken over, stop every agent of this driver."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                await asyncio.to_thread(self.store.renew_lease, run_id, holder, self.lease_seconds)
            except LeaseLost:
                for task in tasks.values():
                    task.cancel()
                return

    def _fail(self, run_id: str, holder: str, error: str) -> None:
        with contextlib.suppress(StoreError):
            failed = self.store.append(run_id, ev.RunFailed(error=error[:MAX_ERROR_CHARS]), holder=holder)
            self.run_metrics.observe(failed)

    def _context(self, run_id: str, state: RunState, holder: str) -> RunContext:
        workflow = workflow_of(state)
        folder = self.runs_dir / run_id
        workspace = folder / "workspace"
        workspace.mkdir(parents=True, exist_ok=True, mode=0o700)
        recordings = folder / "recordings"
        recordings.mkdir(parents=True, exist_ok=True, mode=0o700)
        policy = PinnedPolicy.from_json(state.policy, run_id) if state.policy is not None else self.policy
        candidate = PinnedPolicy.of(self.shadow_guards, list(policy.patterns),
                                    list(policy.roles) if policy.roles is not None else None, policy.limits) \
            if self.shadow_guards is not None else None  # fmt: skip
        # every report to the guards recorded (policy replay --run), the shadow candidate decided beside
        guards = ReportedGuards(run_id, workflow, workspace, policy, self.runs_dir / ".pinned", state.budgets,
                                candidate)  # fmt: skip
        ctx = RunContext(run_id, workflow, guards, workspace, recordings, RunRecording(recordings),
                         state.model or "local", holder, policy,
                         policy.limits or self.config, models=dict(state.models),
                         fallback=list(state.fallback), credentials=frozenset(state.credentials),
                         prices={m: Price.model_validate(p) for m, p in state.prices.items()})  # fmt: skip
        ctx.log = RunLog(self.store, run_id, holder, guards, frozenset(policy.triggers), self._notify)
        ctx.rounds = ModelRounds(ctx.recording, ctx.prices, self.metrics.stream_aborts, self.run_metrics.providers)
        for spec in workflow.agents:  # every model the run uses, now: one that cannot load fails the run at start
            self.backends_for(ctx, spec)
        refs = [tool for spec in workflow.agents for tool in spec.tools if is_mcp_tool(tool)]
        if refs:  # the MCP servers, connected once per process; a tool no server lists fails the run at start
            ctx.mcp = self._mcp_tools()
            ctx.mcp.check(refs)
            ctx.described = {name: ctx.mcp.describe(name) for name in ctx.mcp.tools}
            given = {agent_tool_name(ref) for ref in refs}  # the workflow's MCP tools, not every one a server lists
            ctx.guards.mcp_tools([tool for tool in ctx.mcp.listed() if tool[0] in given])
        settings = self.settings.mcp
        labels = {name: dict(server.labels) for name, server in settings.servers.items()}
        ctx.flows = RunFlows(workflow, natures(workflow, ctx.mcp.tools if ctx.mcp is not None else {}, labels),
                             labels_may_loosen=settings.labels_may_loosen, max_calls=settings.history_calls,
                             max_bytes=settings.history_bytes)  # fmt: skip
        ctx.guards.flow_tools(ctx.flows.tool_facts())
        return ctx

    def _mcp_tools(self) -> McpTools:
        """The configuration's MCP servers ([mcp.servers]), connected on first use."""
        if self._mcp is None:
            self._mcp = McpTools(self.settings.mcp.servers, self.settings.mcp.start_timeout_sec)
        return self._mcp

    @property
    def configured_models(self) -> frozenset[str]:
        """Every model spec the operator's configuration names."""
        models = self.settings.models
        named = [models.default, *models.roles.values(), *models.agents.values(), *models.fallback]
        named += [profile.model for profile in self.config.shard_profiles.values()]
        return frozenset(spec for spec in named if spec)

    @property
    def credential_origins(self) -> frozenset[str]:
        """The endpoints the operator's configuration names for models: the only ones (with a run's own --model)
        that receive ``GROUNDSTATE_API_KEY``."""
        named = [*self.configured_models]
        named += [f"openai-chat:endpoint@{endpoint}" for endpoint in self.settings.models.endpoints]  # as specs
        return frozenset(o for o in map(origin_of, named) if o is not None)

    def _refuse_unconfigured_urls(self, source: str, specs: list[str | None]) -> None:
        """A run not created from the operator's command line calls only model endpoints the configuration names."""
        allowed = self.credential_origins
        # "local" is the embedded model; a file path, or a URL whose origin cannot be read, is never an account's
        configured = {"local", *self.configured_models}
        foreign = sorted({s for s in specs if s is not None and s not in configured and origin_of(s) not in allowed})
        if foreign:
            raise WorkflowError(source, [f"model {spec!r}: its URL is not one the configuration's [models] names; "
                                         "a run started this way may only use those" for spec in foreign])  # fmt: skip

    def _make_backend(self, ctx: RunContext, spec: str) -> Backend:
        if self._backend_factory is make_backend:
            return make_backend(spec, credentialed=origin_of(spec) in self.credential_origins | ctx.credentials)
        return self._backend_factory(spec)

    def _configured_models(self, workflow: Workflow) -> dict[str, str]:
        """The configuration's model for each agent that names none itself: ``models.agents``, else
        ``models.roles`` by the agent's role (recorded in the run, so a later configuration does not change it)."""
        chosen = {}
        for spec in workflow.agents:
            role = workflow.role(spec.id)
            configured = (self.settings.models.agents.get(spec.id)
                          or (self.settings.models.roles.get(role.prefix) if role else None)
                          or self.config.shard(spec.id.split("_", 1)[0]).model)  # fmt: skip
            if spec.model is None and configured is not None:
                chosen[spec.id] = configured
        return chosen

    def backend_for(self, ctx: RunContext, spec: AgentSpec) -> Backend:
        """The agent's model: its own ``model``, else the configuration's (recorded at creation), else the
        workflow's, else the run's (each built once per spec)."""
        model = spec.model or ctx.models.get(spec.id) or ctx.workflow.model
        if model not in ctx.backends:
            run_backend = self._backend if model is None else None
            ctx.backends[model] = run_backend or self._make_backend(ctx, model or ctx.run_model)
        return ctx.backends[model]

    def backends_for(self, ctx: RunContext, spec: AgentSpec) -> list[Backend]:
        """The agent's model, then the run's fallback models in their order (each built once per spec)."""
        chosen = [self.backend_for(ctx, spec)]
        for model in ctx.fallback:
            if model not in ctx.backends:
                ctx.backends[model] = self._make_backend(ctx, model)
            chosen.append(ctx.backends[model])
        return chosen

    def _notify(self, event: ev.Event) -> None:
        """An appended event to the metrics and the listeners (the run log reports it to the guards)."""
        self.run_metrics.observe(event)
        for listener in self.listeners:
            listener(event)

    # -- the operator ------------------------------------------------------------------------------------
    def decide(
        self,
        run_id: str,
        decision: str,
        instructions: str | None = None,
        actor: str = "operator",
        pause: int | None = None,
    ) -> RunState:
        """Apply the operator's decision to the open pause ``pause`` (its id: ``Pause.id``). Without an id, only a
        run with exactly one open pause can be decided. DecisionError when the run is not awaiting approval, the id
        names no open pause (one already decided is named as such), or several are open and none is named."""
        check_decision(decision)
        self_approval = self.settings.access.self_approval

        def build(state: RunState) -> Planned:
            return decision_events(state, decision, instructions, actor, pause, self_approval)

        for event in self.store.transact(run_id, build, actor):  # serialised with every other write to the run
            self._notify(event)
            if event.type == ev.APPROVAL_DECIDED and event.agent:  # the operator has seen its calls in doubt
                self.journal.resolve(f"run:{run_id}/{event.agent}/", actor, decision)
        return self.store.state(run_id)

    def expire_pauses(self, now: datetime | None = None) -> list[tuple[str, int, str]]:
        """Decide every open pause that has waited longer than ``[approvals] timeout_sec`` as approvals.mg says (a
        safety pause aborts its run, a quality pause gets ``default_decision``), as the actor
        ``policy:approval_timeout``; (run, pause, decision) for each. A pause decided meanwhile is left alone."""
        approvals = self.settings.approvals
        if approvals.timeout_sec is None:
            return []
        waiting = self.store.awaiting().states  # a run whose log cannot be read cannot be decided either
        due = expired([(state.run_id, pause) for state in waiting for pause in state.pauses], approvals.timeout_sec,
                      approvals.default_decision, now or datetime.now(UTC))  # fmt: skip
        decided = []
        for run_id, pause, decision in due:
            with contextlib.suppress(DecisionError, RunEnded):  # decided, or the run aborted, meanwhile
                self.decide(run_id, decision, actor=TIMEOUT_ACTOR, pause=pause)
                decided.append((run_id, pause, decision))
        return decided

    def repin(self, run_id: str, actor: str = "operator") -> RunState:
        """Pin the run to this runtime's policy (its configuration's guard files, patterns, roles and limits), as a
        logged ``PolicyRepinned`` event naming the previous digest. Only a run nobody drives (pending, awaiting
        approval or failed) can be re-pinned: LeaseHeld while a driver holds it, DecisionError when it is running
        or has ended; WorkflowError if the run's agents have no role under the new pin."""
        holder = f"repin:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.store.acquire_lease(run_id, holder, self.lease_seconds)  # no driver may start meanwhile
        try:

            def build(state: RunState) -> Planned:
                planned = repin_events(state, self.policy.to_json())
                parse_workflow(state.workflow, run_id, roles=self.roles)  # every agent keeps a role
                return planned

            self.store.transact(run_id, build, actor)
        finally:
            with contextlib.suppress(StoreError):
                self.store.release_lease(run_id, holder)
        return self.store.state(run_id)
