"""Driving one segment of a run: from taking its lease to the moment it completes, fails, is aborted or waits.

A segment is what one driver does with a run while it holds the run's lease: it builds the run's context (its
pinned policy, guards, models, MCP tools, data flows), says it started or resumed, schedules the agents that are
ready — each attempt is ``attempt.py``'s — until none is running, and says how the run ended. The lease is renewed
in the background; if another driver takes it over, every agent of this one is cancelled and nothing more is
written. A failure of the driver itself is a ``RunFailed`` (resumable), never a run left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime
from typing import Protocol

from .. import tracing
from ..config import Price
from ..errors import StoreError
from ..kernel import Metrics, count_completed_run
from ..store import this_process
from . import run_events as ev
from .attempt import MAX_ERROR_CHARS, Attempts
from .backends import Backend, granted_endpoints
from .conversation import ModelRounds
from .flows import RunFlows, natures
from .mcp_tools import McpTools
from .metrics import RunMetrics
from .options import RuntimeOptions
from .policy import PinnedPolicy
from .progress import all_settled, closing, opening
from .recordings import RunRecording
from .reported import ReportedGuards
from .run_context import RunContext
from .run_log import RunLog
from .state import AWAITING_APPROVAL, FAILED, RUNNING, TERMINAL, RunEnded, RunState
from .store import EventStore, LeaseHeld, LeaseLost
from .workflow import AgentSpec, agent_tool_name, is_mcp_tool, workflow_of


class Host(Protocol):
    """What driving a segment needs of the runtime: its store, options and collaborators, and the node it runs on
    (a cluster worker renames it)."""

    store: EventStore
    options: RuntimeOptions
    attempts: Attempts
    metrics: Metrics
    run_metrics: RunMetrics
    node: str

    def backends_for(self, ctx: RunContext, spec: AgentSpec) -> list[Backend]: ...

    def mcp_tools(self) -> McpTools: ...

    def notify(self, event: ev.Event) -> None: ...


class Segments:
    """The segments of every run one runtime drives."""

    def __init__(self, host: Host) -> None:
        self.host = host

    async def drive(self, run_id: str, *, resume_failed: bool = False, take_over: bool = False) -> RunState:
        """``Runtime.drive``: one segment of the run, under its lease (see there)."""
        store = self.host.store
        state = store.state(run_id)
        if state.status in (*TERMINAL, AWAITING_APPROVAL) or (state.status == FAILED and not resume_failed):
            return state
        options = self.host.options
        store.check_untouched(run_id, options.audit_key, options.audit_required, "driving the run is")
        pid_and_start = this_process().split(":", 1)[1]  # with the node: a dead holder on this host is known dead
        holder = f"{self.host.node}:{pid_and_start}:{uuid.uuid4().hex[:8]}"
        if not await self._acquire(run_id, holder, take_over):
            return store.state(run_id)
        try:
            with tracing.span("run", {"groundstate.run.id": run_id, "gen_ai.conversation.id": run_id}) as current:
                state = await self._segment(run_id, holder)
                tracing.note(current, groundstate__workflow=state.name, groundstate__status=str(state.status))
            self.host.run_metrics.segments.labels(state.status).inc()
            return state
        finally:
            with contextlib.suppress(StoreError):
                store.release_lease(run_id, holder)

    async def _acquire(self, run_id: str, holder: str, take_over: bool) -> bool:
        """The run's lease for ``holder``; False when another driver holds it and is alive (``take_over``)."""
        store, lease_seconds = self.host.store, self.host.options.lease_seconds
        seen = None
        while True:
            try:
                store.acquire_lease(run_id, holder, lease_seconds)
                return True
            except LeaseHeld:
                if not take_over:
                    raise
            current = store.lease(run_id)
            if current is not None and seen is not None and current != seen:
                return False  # renewed (or taken) meanwhile: its driver is alive
            seen = current
            left = (current[1] - datetime.now(UTC)).total_seconds() if current is not None else 0.0
            await asyncio.sleep(min(max(left, 0.0) + 0.05, lease_seconds))

    async def _segment(self, run_id: str, holder: str) -> RunState:
        store = self.host.store
        state = store.state(run_id)
        try:
            ctx = self.context(run_id, state, holder)
        except Exception as exc:  # no model, unreadable workflow: the run cannot start or continue
            self._fail(run_id, holder, f"{type(exc).__name__}: {exc}")
            return store.state(run_id)
        tasks: dict[str, asyncio.Task[None]] = {}
        renewer = asyncio.create_task(self._renew(run_id, holder, tasks))
        try:
            started = opening(state, holder)
            ctx.log.emit(started)
            if isinstance(started, ev.RunResumed):
                self.host.attempts.calls_in_doubt(ctx)
            await self._schedule(ctx, tasks)
            self._conclude(ctx)
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
        return store.state(run_id)

    def _conclude(self, ctx: RunContext) -> None:
        """No agent is running: the run's ending as ``progress.closing`` decides it (a completed run counts
        towards the quarantine of learned rules first)."""
        state = self.host.store.state(ctx.run_id)
        learned = []
        if state.status == RUNNING and all_settled(state):
            learned = [{"rule": r.number, "remaining": r.remaining}
                       for r in count_completed_run(self.host.options.learned.file())]  # fmt: skip
        ending = closing(state, learned)
        if ending is not None:
            ctx.log.emit(ending)

    async def _schedule(self, ctx: RunContext, tasks: dict[str, asyncio.Task[None]]) -> None:
        """Start every agent that is ready, as the ones before it settle, until none is running."""
        options = self.host.options
        semaphore = asyncio.Semaphore(min(options.concurrency, ctx.limits.core_limits.max_concurrent_shards))
        running: set[asyncio.Task[None]] = set()  # the tasks not yet done (``tasks`` keeps every agent's last)
        while True:
            state = self.host.store.state(ctx.run_id)
            if state.status == RUNNING:
                for agent in ctx.readiness.ready(ctx.workflow, state.nodes, tasks):
                    tasks[agent] = asyncio.create_task(self.host.attempts.run(ctx, agent, semaphore))
                    running.add(tasks[agent])
            if not running:
                break
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]

    async def _renew(self, run_id: str, holder: str, tasks: dict[str, asyncio.Task[None]]) -> None:
        """Keep the lease while driving; if it was taken over, stop every agent of this driver."""
        lease_seconds = self.host.options.lease_seconds
        while True:
            await asyncio.sleep(lease_seconds / 3)
            try:
                await asyncio.to_thread(self.host.store.renew_lease, run_id, holder, lease_seconds)
            except LeaseLost:
                for task in tasks.values():
                    task.cancel()
                return

    def _fail(self, run_id: str, holder: str, error: str) -> None:
        with contextlib.suppress(StoreError):
            failed = self.host.store.append(run_id, ev.RunFailed(error=error[:MAX_ERROR_CHARS]), holder=holder)
            self.host.run_metrics.observe(failed)

    def context(self, run_id: str, state: RunState, holder: str) -> RunContext:
        """What every attempt of this segment shares: the run's folders, its pinned policy and guards, its models
        (each loaded now: one that cannot load fails the run at start), MCP tools and data flows."""
        host, options = self.host, self.host.options
        workflow = workflow_of(state)
        folder = options.runs_dir / run_id
        workspace = folder / "workspace"
        workspace.mkdir(parents=True, exist_ok=True, mode=0o700)
        recordings = folder / "recordings"
        recordings.mkdir(parents=True, exist_ok=True, mode=0o700)
        policy = PinnedPolicy.from_json(state.policy, run_id) if state.policy is not None else options.policy
        candidate = PinnedPolicy.of(options.shadow_guards, list(policy.patterns),
                                    list(policy.roles) if policy.roles is not None else None, policy.limits) \
            if options.shadow_guards is not None else None  # fmt: skip
        # every report to the guards recorded (policy replay --run), the shadow candidate decided beside
        guards = ReportedGuards(run_id, workflow, workspace, policy, options.runs_dir / ".pinned", state.budgets,
                                candidate)  # fmt: skip
        ctx = RunContext(run_id, workflow, guards, workspace, recordings, RunRecording(recordings),
                         state.model or "local", holder, policy,
                         policy.limits or options.limits, models=dict(state.models),
                         fallback=list(state.fallback),
                         credentials=granted_endpoints(run_id, state.credentials, state.grants,
                                                       options.credential_origins),
                         prices={m: Price.model_validate(p) for m, p in state.prices.items()})  # fmt: skip
        ctx.log = RunLog(host.store, run_id, holder, guards, frozenset(policy.triggers), host.notify)
        ctx.rounds = ModelRounds(ctx.recording, ctx.prices, host.metrics.stream_aborts, host.run_metrics.providers)
        for spec in workflow.agents:
            host.backends_for(ctx, spec)
        refs = [tool for spec in workflow.agents for tool in spec.tools if is_mcp_tool(tool)]
        if refs:  # the MCP servers, connected once per process; a tool no server lists fails the run at start
            ctx.mcp = host.mcp_tools()
            ctx.mcp.check(refs)
            ctx.described = {name: ctx.mcp.describe(name) for name in ctx.mcp.tools}
            given = {agent_tool_name(ref) for ref in refs}  # the workflow's MCP tools, not every one a server lists
            ctx.guards.mcp_tools([tool for tool in ctx.mcp.listed() if tool[0] in given])
        mcp = options.mcp
        labels = {name: dict(server.labels) for name, server in mcp.servers.items()}
        ctx.flows = RunFlows(workflow, natures(workflow, ctx.mcp.tools if ctx.mcp is not None else {}, labels),
                             labels_may_loosen=mcp.labels_may_loosen, max_calls=mcp.history_calls,
                             max_bytes=mcp.history_bytes)  # fmt: skip
        ctx.guards.flow_tools(ctx.flows.tool_facts())
        return ctx
