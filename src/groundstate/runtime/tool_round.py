"""One round of tool calls of an agent's conversation: each call the model requested is written (``ToolCall``),
reported to the guards with where its values came from, refused, held for the operator or let through; the kernel
decides and runs the calls let through (in the agent's own kernel, through the tool journal); each gets its
``ToolResult``, and the results go back to the model. A call is judged before it runs, never after: a pause holds
the whole round, a cortex interrupt on ``ToolCall`` aborts the run before any call of the round runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .. import tools as python_tools
from .. import tracing
from ..config import LearnedConfig
from ..kernel import (
    ARGUMENT_IS_PAYLOAD,
    EXECUTORS,
    ActionReport,
    ColdStorage,
    JournaledEffects,
    Kernel,
    LearnedRules,
    Metrics,
    Request,
    Shards,
    VirtualStore,
)
from ..logic import LogicError, Name
from ..packets import GateResult
from ..provenance import ArgumentsRefused
from ..store import ToolJournal
from . import run_events as ev
from .conversation import Conclusion, Conversation
from .guards import PauseDecision, defaults_dir
from .run_context import RunContext, Said
from .state import ApprovedCall, tool_call_digest
from .store import EventStore
from .workflow import AgentSpec, agent_tool_name, is_mcp_tool

HELD_FOR_OPERATOR = "not run: a later call of the same round paused the run for the operator"
INTERRUPTED_BEFORE_CALL = "not run: a cortex pattern interrupted the run when the call was requested"
AGENT_POLICY = [defaults_dir() / "agent_tools.mg"]  # what an agent's own kernel adds to the shipped policy


RequestsApproval = Callable[[RunContext, str, PauseDecision, str, Said, int | None], None]  # the attempt's pause


class ToolRound:
    """The tool rounds of every conversation a runtime drives: what they need of it, given once."""

    def __init__(
        self,
        store: EventStore,
        journal: ToolJournal,
        search: Any,
        metrics: Metrics,
        learned: LearnedConfig,
        request_approval: RequestsApproval,
        cortex_actions: Callable[[RunContext, str], bool],
    ) -> None:
        self.store, self.journal, self.search, self.metrics, self.learned = store, journal, search, metrics, learned
        self.request_approval = request_approval  # a pause the round needs: the attempt asks for it
        self.cortex_actions = cortex_actions  # interrupts and spawns a pattern on ToolCall derived

    def __call__(
        self,
        ctx: RunContext,
        conversation: Conversation,
        gated: GateResult,
        requests: list[Request],
        conclusion: Conclusion,
    ) -> bool:
        """One round: report each requested tool call to the guards, then let the kernel decide and run them; every
        ToolCall event gets its ToolResult, and the results go back to the model as the conversation's next message.
        False when a guard paused the run (the calls were not run) or a cortex pattern aborted it."""
        agent = conversation.spec.id
        calls: list[int] = []
        approvals = list(self.store.state(ctx.run_id).approved_calls.get(agent, []))  # each lets one call through
        checked: list[Request] = []  # the requests, those an operator approved marked so for the constitution
        refused: dict[int, str] = {}  # calls flows.mg refused (by ToolCall seq): they get their result now
        for request in requests:
            tool = request.type.lstrip("/")
            call = ctx.log.emit(ev.ToolCall(tool=tool, target=request.target, payload=request.payload), agent)
            calls.append(call.seq)
            digest = tool_call_digest({"tool": tool, "target": request.target, "payload": request.payload})
            approved = next((a for a in approvals if a.digest == digest), None)
            if approved is not None:
                approvals.remove(approved)
            checked.append(replace(request, operator_approved=True) if approved is not None else request)
            with tracing.span(f"decide {tool}", {"gen_ai.tool.name": tool, "groundstate.checkpoint": "tool_call",
                                                 "gen_ai.tool.call.id": str(call.seq)}) as deciding:  # fmt: skip
                pause, denial, why = self._check_call(ctx, conversation, call.seq, request, approved)
                tracing.note(deciding, groundstate__decision="deny" if denial else "pause" if pause else "continue")
            if denial is not None:  # a refusal wins over a pause: the call does not run, the agent reads why
                refused[call.seq] = denial
                refusal = ev.ToolResult(call=call.seq, tool=tool, decision="/deny", status=None, output="",
                                        reason=denial, policy=ctx.policy.digest, why=why)  # fmt: skip
                ctx.log.emit(refusal.leaving_out("why"), agent)
                continue
            if pause:  # the earlier calls of the round will not run either; the held one awaits the operator
                for seq, held in zip(calls[:-1], requests, strict=False):
                    if seq not in refused:
                        ctx.log.emit(ev.ToolResult(call=seq, tool=held.type.lstrip("/"), decision="/deny",
                                                      status=None, output="", reason=HELD_FOR_OPERATOR), agent)
                said = Said(gated.surface, conclusion.reasoning(), conclusion.usage(),
                            warnings=conclusion.shown_warnings())  # fmt: skip
                self.request_approval(ctx, agent, pause, "tool_call", said, call.seq)
                conclusion.paused = True
                return False
        running = [(request, seq, mine) for request, seq, mine in zip(requests, calls, checked, strict=True)
                   if seq not in refused]  # fmt: skip
        if ctx.policy.acting and ctx.guards.interrupts():  # a pattern on ToolCall acts before the call, never after
            for held, seq, _ in running:
                ctx.log.emit(ev.ToolResult(call=seq, tool=held.type.lstrip("/"), decision="/deny", status=None,
                                              output="", reason=INTERRUPTED_BEFORE_CALL), agent)  # fmt: skip
            self.cortex_actions(ctx, agent)
            conclusion.paused = True  # the run is aborted: this attempt writes nothing more
            return False
        results: dict[int, tuple[str, ActionReport | None, str]] = {
            seq: (request.type.lstrip("/"), None, refused[seq]) for request, seq in zip(requests, calls, strict=True)
            if seq in refused}  # fmt: skip
        if running:
            self._run_calls(ctx, conversation, gated, running, conclusion, results)
        conversation.messages.append({"role": "assistant", "content": "".join(conversation.raw)})
        conversation.raw.clear()
        summary = _summary([results[seq] for seq in calls if seq in results])
        conversation.messages.append({"role": "user", "content": f"Tool results:\n{summary}\n\n"
                                                                "Now answer the task."})  # fmt: skip
        return True

    def _check_call(
        self, ctx: RunContext, conversation: Conversation, seq: int, request: Request, approved: ApprovedCall | None
    ) -> tuple[PauseDecision | None, str | None, dict[str, Any] | None]:
        """Report a requested call to the guards with where its values came from: the pause it needs, why it is
        refused (its arguments cannot be judged whole, or the rules on flows refuse it) and that refusal's
        derivation. What cannot be judged is refused, never run unjudged."""
        agent, tool = conversation.spec.id, request.type.lstrip("/")
        argument = request.payload if tool in ARGUMENT_IS_PAYLOAD else request.target
        content = request.payload if tool not in ARGUMENT_IS_PAYLOAD and request.payload else None
        reasons = approved.reasons if approved is not None else None
        denial: str | None = None
        try:
            flows = self._flows_of(ctx, conversation, seq, tool, request)
        except ArgumentsRefused as exc:
            flows, denial = None, f"refused: {exc}"
        try:
            pause = ctx.guards.tool_call(agent, seq, tool, argument, content, reasons, flows=flows)
        except LogicError as exc:  # the flows are more than the engine may derive
            if flows is None:
                raise
            flows, denial = None, (f"refused: the rules on flows could not be evaluated on this call within the "
                                   f"engine's limits ({exc.message[:300]})")  # fmt: skip
            pause = ctx.guards.tool_call(agent, seq, tool, argument, content, reasons)
        if denial is not None:
            return pause, denial, None
        denial = next(iter(ctx.guards.refusals(agent, seq)), None)
        return pause, denial, ctx.guards.why_refused(agent, seq, denial) if denial is not None else None

    def _run_calls(
        self,
        ctx: RunContext,
        conversation: Conversation,
        gated: GateResult,
        running: list[tuple[Request, int, Request]],
        conclusion: Conclusion,
        results: dict[int, tuple[str, ActionReport | None, str]],
    ) -> None:
        """The kernel decides and runs the round's calls nothing refused or held (``running``: each request, its
        ToolCall's seq and the request as checked), one by one; each gets its ToolResult and its line in
        ``results``."""
        agent = conversation.spec.id
        shards = conversation.shards or self._agent_shards(ctx, conversation.spec, conversation.journal_scope)
        conversation.shards = shards
        before = shards.cold.count() if shards.cold is not None else 0
        with tracing.span(
            "execute_tool",
            {
                "gen_ai.operation.name": "execute_tool",
                "groundstate.tools": ",".join(r.type.lstrip("/") for r, _, _ in running),
            },
        ):
            reports = shards.step_gated(gated, [mine for _, _, mine in running])  # the kernel decides and runs them
            # each call's decision and conclusion, a span under the round's
            conclusion.archived += (shards.cold.count() if shards.cold is not None else 0) - before
            by_source = {r.source: r for r in reports}
            for (request, call_seq, _), source in zip(running, shards.request_ids, strict=True):
                tool = request.type.lstrip("/")
                report = by_source.get(source)
                results[call_seq] = (tool, report, "")
                replayed = report is not None and report.action_id in shards.replayed  # it ran before the driver
                result = ev.ToolResult(  # stopped: its recorded result, not a rerun
                    call=call_seq, tool=tool, decision=report.decision if report else "/deny",
                    reason=report.reason if report else "the kernel took no action for this request",
                    status=report.status if report else None, output=(report.output or "") if report else "",
                    journal="replayed" if replayed else None).leaving_out("journal")  # fmt: skip
                if tracing.enabled():  # the kernel's decision on this call and its conclusion, under the calls' span
                    traced = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                              "gen_ai.tool.call.id": str(call_seq), "groundstate.decision": str(result.decision),
                              "groundstate.status": str(result.status)}  # fmt: skip
                    with tracing.span(f"execute_tool {tool}", traced):
                        pass
                ctx.log.emit(result, agent)
                if report is not None and report.status == "/success":
                    conclusion.executed.append(tool)

    def _flows_of(
        self, ctx: RunContext, conversation: Conversation, seq: int, tool: str, request: Request
    ) -> tuple[str, list[tuple[str, tuple[Any, ...]]]] | None:
        """Where each value of the call came from (runtime/flows.py), for the rules on flows; None when the run's
        pinned rules have none (a run created before they were shipped)."""
        if ctx.flows is None or not ctx.guards.judges_flows:
            return None
        state = self.store.state(ctx.run_id)
        return ctx.flows.call(state, conversation.spec.id, seq, tool, request.target, request.payload,
                              remembered=conversation.remembered)  # fmt: skip

    def _agent_shards(self, ctx: RunContext, spec: AgentSpec, journal_scope: str = "") -> Shards:
        """The conversation's kernel, built when the model first asks for a tool: only the agent's own tools, under the
        configured limits (its facts bounded by the agent's profile's ``max_facts_in_shard_kernel``), every call
        through the tool journal in ``journal_scope``."""
        profile = ctx.limits.shard(spec.id.split("_", 1)[0])
        core = ctx.limits.core_limits.model_copy(update={"max_facts_in_kernel": profile.max_facts_in_shard_kernel})
        config = ctx.limits.model_copy(update={"core_limits": core})
        kernel = Kernel(ctx.workspace, extra_sources=AGENT_POLICY, config=config)
        kernel.assert_facts("agent_may_use", *[(Name.of(t),) for t in spec.agent_tools])
        mine = [(Name.of(t),) for t in spec.tools if t in python_tools.REGISTRY]
        if mine:  # your own Python tools: known actions, routed to the python_tool executor (routes.mg)
            kernel.assert_facts("python_tool", *mine)
        served = [(Name.of(agent_tool_name(t)),) for t in spec.tools if is_mcp_tool(t)]
        if served:  # MCP tools: known actions, routed to the mcp_tool executor (routes.mg)
            kernel.assert_facts("mcp_tool", *served)
        learned = self.learned
        if learned.file().exists():  # the project's learned rules: quarantined ones record, active ones act
            LearnedRules(kernel, learned.file(), quarantine_evaluations=learned.quarantine_runs, count="runs")
        executors = {**EXECUTORS, "mcp_tool": ctx.mcp.execute} if ctx.mcp is not None else None
        store = VirtualStore(kernel.workspace, executors, search=self.search, max_output_chars=core.max_output_chars,
                             total_memory_mb=core.max_total_memory_mb)  # fmt: skip
        cold = ColdStorage(ctx.recordings.parent / "kernel" / f"{spec.id}-actions.sqlite")  # retention's archive
        shard_type = spec.id.split("_", 1)[0]  # the agent's profile, never one its packets name
        journal = JournaledEffects(self.journal, journal_scope) if journal_scope else None
        return Shards(kernel, store, cold=cold, metrics=self.metrics, shard_type=shard_type, journal=journal)



def _summary(results: list[tuple[str, ActionReport | None, str]]) -> str:
    """The round's results as the agent reads them: each call's decision, status and output, or why it was refused."""
    return "\n\n".join(
        f"Tool {tool} ({report.decision} {report.reason}): {report.status or 'not run'}\n{report.output or ''}"
        if report is not None else f"Tool {tool} (/deny {refusal}): not run" if refusal else f"Tool {tool}: not run"
        for tool, report, refusal in results
    )  # fmt: skip


