"""The RARO runtime: runs workflow DAGs, consults the guard kernel at every checkpoint, pauses for the operator.

Every state change is an event in the store first; the in-memory view is always rebuilt from the log, so a
process killed mid-run resumes exactly: agents that completed are not run again, an agent that was interrupted
mid-conversation runs again.

``Runtime`` is a facade: its settings are resolved once (``options.py``), a segment of a run is driven by
``segment.py``, one attempt of an agent by ``attempt.py``, the conversation with its model by ``conversation.py``
and ``tool_round.py``, the operator's decisions by ``operator_actions.py`` (docs/architecture.md maps them).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import tools as python_tools
from ..config import KernelConfig, ProjectConfig
from ..kernel import Metrics, configured_search
from ..store import ToolJournal
from . import run_events as ev
from .attempt import Attempts
from .backends import Backend, check_model_spec, endpoint_of, grant_of, make_backend, origin_of, provider_key
from .mcp_tools import McpTools
from .metrics import RunMetrics
from .notify import Webhook
from .operator_actions import OperatorActions
from .options import RuntimeOptions
from .policy import PinnedPolicy
from .run_context import RunContext
from .run_memory import open_memory
from .segment import Segments
from .state import RunState
from .store import EventStore
from .tool_round import ToolRound
from .workflow import AgentSpec, Role, Workflow, WorkflowError, is_mcp_tool, parse_workflow


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
        self.settings = settings or ProjectConfig()  # the project configuration (groundstate.toml), as loaded
        self.options = RuntimeOptions.resolve(self.settings, home, patterns_path=patterns_path, concurrency=concurrency,
                                              max_rounds=max_rounds, lease_seconds=lease_seconds,
                                              limits=config)  # what this runtime obeys, resolved once  # fmt: skip
        self.home = home
        self.node = socket.gethostname()  # names this process's driver in leases and RunStarted/RunResumed
        self._backend = backend
        self._backend_factory = backend_factory
        self.metrics = Metrics()  # the kernel's, shared by every agent's shards
        self.run_metrics = RunMetrics(self.metrics)  # the runtime's, in the same registry
        self.search = search or configured_search(self.settings.search)  # what web_search searches
        self.memory = open_memory(self.settings.memory, store.engine)  # agents' long-term and vector memory
        if store.audit_key is None:  # [audit] sign: run heads and the store's chain signed with the operator's key
            store.audit_key = self.settings.audit.key()
        self.journal = ToolJournal(store.url, audit_key=store.audit_key)  # every tool call: intent, then result
        self._mcp: McpTools | None = None  # the MCP servers workflow agents' tools come from, once needed
        if self.settings.tools.modules:  # your own Python tools, registered as their modules are imported
            python_tools.load_modules(self.settings.tools.modules, self.settings.tools.path)
        self.attempts = Attempts(self)  # one attempt of one agent (runtime/attempt.py)
        self.tool_round = ToolRound(store, self.journal, self.search, self.metrics, self.options.learned,
                                    self.attempts.request_approval, self.attempts.cortex_actions)  # fmt: skip
        self.segments = Segments(self)  # one segment of a run under its lease (runtime/segment.py)
        self.operator = OperatorActions(store, self.journal, self.options, self.notify)  # runtime/operator_actions.py
        self.listeners: list[Callable[[ev.Event], None]] = []
        self.notifier = Webhook.configured(self.settings.notify, lambda run_id: self.store.state(run_id).name,
                                           store.engine)  # fmt: skip
        if self.notifier is not None:  # [notify] webhook: told of pauses, completions, failures, aborts
            self.listeners.append(self.notifier)
            self.notifier.resume()  # what a stopped process left unsent

    def close(self, timeout: float = 30.0) -> None:
        """Before the process exits: wait (up to ``timeout`` seconds) for notifications still being delivered, and
        stop the MCP servers the runs used as a client should (their input closed, time to leave, then signals),
        before anything stops them harder."""
        if self.notifier is not None:
            self.notifier.flush(timeout)
        if self._mcp is not None:
            self._mcp.close()
            self._mcp = None

    # -- the resolved options, read-only ----------------------------------------------------------------
    @property
    def policy(self) -> PinnedPolicy:
        """What new runs are pinned to: the configuration's guards, patterns, roles and limits."""
        return self.options.policy

    @property
    def roles(self) -> list[Role] | None:
        """The configuration's roles, for workflows that declare none (None: the shipped default roles)."""
        return self.options.roles

    @property
    def config(self) -> KernelConfig:
        """The limits: shard profiles bound each agent's prompt and model calls."""
        return self.options.limits

    @property
    def runs_dir(self) -> Path:
        """Each run's workspace and recordings."""
        return self.options.runs_dir

    @property
    def lease_seconds(self) -> float:
        """How long after its driver's last renewal a run can be taken over."""
        return self.options.lease_seconds

    @property
    def concurrency(self) -> int:
        """How many agents of one run run at once (at most ``core_limits.max_concurrent_shards``)."""
        return self.options.concurrency

    @property
    def max_rounds(self) -> int:
        """Model rounds per attempt."""
        return self.options.max_rounds

    @property
    def configured_models(self) -> frozenset[str]:
        """Every model spec the operator's configuration names."""
        return self.options.configured_models

    @property
    def credential_origins(self) -> frozenset[str]:
        """The endpoints the operator's configuration names for models: the only ones (with a run's own --model)
        that receive ``GROUNDSTATE_API_KEY``."""
        return self.options.credential_origins

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
        unknown = sorted(servers - set(self.options.mcp.servers))
        if unknown:
            raise WorkflowError(source, [f"mcp:{name}/...: the configuration has no [mcp.servers.{name}]"
                                         for name in unknown])  # fmt: skip
        model = model or self.options.default_model or "local"
        models = self._configured_models(workflow)
        if self._backend_factory is make_backend:  # refuse a bad spec now, not as a failed run
            named = [model] if self._backend is None else []
            fallback = self.options.fallback
            for spec in [*named, workflow.model, *(a.model for a in workflow.agents), *models.values(), *fallback]:
                if spec is not None:
                    check_model_spec(spec)
        if not model_is_operators:
            self._refuse_unconfigured_urls(source, [model, workflow.model, *(a.model for a in workflow.agents)])
        own = origin_of(model) if model_is_operators else None
        key, endpoint = provider_key(), endpoint_of(model)
        grants = {endpoint: grant_of(endpoint, key)} if own and key and endpoint else {}
        budgets = dict(self.options.budgets)
        run_id = self.store.create_run(workflow.name, workflow_text, model, actor=actor, policy=self.policy.to_json(),
                                       models=models, budgets=budgets, credentials=[own] if own else [], grants=grants,
                                       fallback=list(self.options.fallback),
                                       prices={m: p.model_dump() for m, p in self.options.prices.items()})  # fmt: skip
        self.store.transact(run_id, lambda state: [(ev.NodeCreated(agent=a), None) for a in workflow.order()])
        self.run_metrics.observe(self.store.events(run_id)[0])
        return run_id

    # -- running ---------------------------------------------------------------------------------------
    async def drive(self, run_id: str, *, resume_failed: bool = False, take_over: bool = False) -> RunState:
        """Run until the run completes, fails, is aborted or waits for the operator. One driver per run: another
        process's live lease makes this raise LeaseHeld; a failed run continues only with ``resume_failed``.
        With ``take_over`` (a cluster's segment drivers), a lease another driver holds is waited out instead: if it
        lapses, this driver takes the run over; if its holder renews it, that one is alive and this returns."""
        return await self.segments.drive(run_id, resume_failed=resume_failed, take_over=take_over)

    def mcp_tools(self) -> McpTools:
        """The configuration's MCP servers ([mcp.servers]), connected on first use (once per process)."""
        if self._mcp is None:
            self._mcp = McpTools(self.options.mcp.servers, self.options.mcp.start_timeout_sec)
        return self._mcp

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
            named = origin_of(spec) in self.credential_origins or endpoint_of(spec) in ctx.credentials
            return make_backend(spec, credentialed=named)
        return self._backend_factory(spec)

    def _configured_models(self, workflow: Workflow) -> dict[str, str]:
        """The configuration's model for each agent that names none itself: ``models.agents``, else
        ``models.roles`` by the agent's role (recorded in the run, so a later configuration does not change it)."""
        chosen = {}
        for spec in workflow.agents:
            role = workflow.role(spec.id)
            configured = (self.options.agent_models.get(spec.id)
                          or (self.options.role_models.get(role.prefix) if role else None)
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

    def notify(self, event: ev.Event) -> None:
        """An appended event to the metrics and the listeners (the run log reports it to the guards)."""
        self.run_metrics.observe(event)
        for listener in self.listeners:
            listener(event)

    # -- the operator (runtime/operator_actions.py) -----------------------------------------------------
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
        return self.operator.decide(run_id, decision, instructions, actor, pause)

    def expire_pauses(self, now: datetime | None = None) -> list[tuple[str, int, str]]:
        """Decide every open pause that has waited longer than ``[approvals] timeout_sec`` as approvals.mg says (a
        safety pause aborts its run, a quality pause gets ``default_decision``), as the actor
        ``policy:approval_timeout``; (run, pause, decision) for each. A pause decided meanwhile is left alone."""
        return self.operator.expire_pauses(now)

    def repin(self, run_id: str, actor: str = "operator") -> RunState:
        """Pin the run to this runtime's policy (its configuration's guard files, patterns, roles and limits), as a
        logged ``PolicyRepinned`` event naming the previous digest. Only a run nobody drives (pending, awaiting
        approval or failed) can be re-pinned: LeaseHeld while a driver holds it, DecisionError when it is running
        or has ended; WorkflowError if the run's agents have no role under the new pin."""
        return self.operator.repin(run_id, actor)
