"""One attempt of one agent: its context (upstream outputs fitted into the window, what memory recalls), the
pre-flight checkpoint, its start, the conversation with the model (rounds of streaming and of tool calls), and its
conclusion — completed (its memory written first), failed, or paused for the operator (``request_approval``), with
the cortex patterns' interrupts and spawns acted on at each. Whatever goes wrong inside an attempt is a hard error of
that agent, never an exception that takes the driver down."""

from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from .. import tracing
from ..kernel import ContextBudgetError, Memory, Request, check_context, load_program, update_validator
from ..packets import UpdateValidator, answer_tags, tool_requests
from ..store import ToolJournal
from . import run_events as ev
from .backends import Backend
from .context import Fitted, fit_upstream, upstream_room
from .conversation import Conclusion, Conversation
from .guards import Answer, PauseDecision, Spent
from .options import RuntimeOptions
from .prompts import envelope_schema, system_prompt, user_prompt
from .run_context import NOTHING_SAID, Answered, RunContext, Said
from .state import RUNNING, SKIPPED, SUCCEEDED, RunEnded, RunState, add_usage
from .store import EventStore, LeaseLost
from .tool_round import AGENT_POLICY, ToolRound
from .workflow import AgentSpec

MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class Attempt:
    """One attempt of one agent as its conversation and its conclusion need it: the run's context, the agent, its
    number, the instructions and system prompt it runs with, the upstream outputs fitted into its window, what memory
    recalled for it, and the tool journal's scope of its calls."""

    ctx: RunContext
    spec: AgentSpec
    number: int  # 1, 2, ... (AgentStarted's ``attempt``)
    instructions: str  # the operator's edited instructions, else the workflow's
    system: str
    upstream: list[tuple[str, str]]  # (agent, output), fitted
    remembered: list[tuple[str, str]]  # (key, value)
    journal_scope: str  # run:ID/AGENT/EPOCH


class Driver(Protocol):
    """What an attempt needs of the runtime that drives it."""

    store: EventStore
    options: RuntimeOptions
    memory: Memory | None
    journal: ToolJournal
    tool_round: ToolRound

    def backend_for(self, ctx: RunContext, spec: AgentSpec) -> Backend: ...

    def backends_for(self, ctx: RunContext, spec: AgentSpec) -> list[Backend]: ...


class Attempts:
    """The attempts of the agents of every run one runtime drives."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def calls_in_doubt(self, ctx: RunContext) -> None:
        """A driver stopped while tool calls were running (journaled intents without results): each agent with such
        calls is reported to the guards at the /resume checkpoint — a pause, never a silent re-run."""
        calls: dict[str, list[tuple[str, str]]] = {}
        for entry in self.driver.journal.in_doubt(f"run:{ctx.run_id}/"):
            agent = entry.scope.rsplit("/", 2)[1]
            calls.setdefault(agent, []).append((entry.tool, str(json.loads(entry.arguments).get("target", ""))))
        state = self.driver.store.state(ctx.run_id)
        for agent, doubtful in calls.items():
            pause = ctx.guards.in_doubt(agent, doubtful) if agent in state.nodes else None
            if pause:
                self.request_approval(ctx, agent, pause, "resume")

    async def run(self, ctx: RunContext, agent: str, semaphore: asyncio.Semaphore) -> None:
        """One attempt of one agent. Whatever goes wrong inside it (a reply nobody foresaw, a bug) is a hard error
        of this agent — a pause with the reason — never an exception that takes the driver down."""
        try:
            await self._attempt(ctx, agent, semaphore)
        except (asyncio.CancelledError, LeaseLost, RunEnded):
            raise
        except Exception as exc:
            error = f"internal error while running the agent: {type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
            ctx.log.emit(ev.AgentFailed(error=error, output=""), agent)
            pause = ctx.guards.finished(agent, "missing", None, [], error, Answer(), error_kind="internal")
            if pause:
                self.request_approval(ctx, agent, pause, "finished", failed=True)

    async def _attempt(self, ctx: RunContext, agent: str, semaphore: asyncio.Semaphore) -> None:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                      "gen_ai.conversation.id": ctx.run_id}  # fmt: skip
        with tracing.span(f"invoke_agent {agent}", attributes):
            await self._one_attempt(ctx, agent, semaphore)

    async def _one_attempt(self, ctx: RunContext, agent: str, semaphore: asyncio.Semaphore) -> None:
        async with semaphore:
            state = self.driver.store.state(ctx.run_id)
            if state.status != RUNNING:
                return  # paused or aborted while waiting for a slot
            spec, node = ctx.workflow.agent(agent), state.nodes[agent]
            upstream = {u: self._kind(state, u) for u in spec.depends_on}
            files = sum(len([t for t in state.nodes[u].tools if t["tool"] == "write_file" and t.get("status") ==
                             "/success"]) for u in spec.depends_on)  # fmt: skip
            instructions, attempt = node.instructions or spec.instructions, node.attempts + 1  # (before the event)
            remembered = self._recall(state, instructions)
            system = system_prompt(ctx.workflow, spec, instructions, ctx.described)  # the same for both below
            context = self._context_of(ctx, state, spec, instructions, remembered, system)
            pause = ctx.guards.preflight(agent, upstream, files, [(f.agent, f.kept, f.total) for f in context if f.cut])
            if pause:
                self.request_approval(ctx, agent, pause, "preflight")
                return
            epoch = node.journal_epoch if node.interrupted else node.journal_epoch + 1  # a crash keeps the epoch
            started = ev.AgentStarted(attempt=attempt, backend=self.driver.backend_for(ctx, spec).name,
                                      instructions=instructions, journal=epoch)  # fmt: skip
            ctx.log.start(agent, started)
            this = Attempt(ctx, spec, attempt, instructions, system, [(f.agent, f.text) for f in context],
                           remembered, journal_scope=f"run:{ctx.run_id}/{agent}/{epoch}")  # fmt: skip
            conclusion = await self._invoke(this)
            if not conclusion.paused:
                await self._conclude(this, conclusion)

    def _context_of(
        self,
        ctx: RunContext,
        state: RunState,
        spec: AgentSpec,
        instructions: str,
        remembered: list[tuple[str, str]],
        system: str,
    ) -> list[Fitted]:
        """The upstream outputs the agent receives, fitted into what its context window leaves for them."""
        outputs = [(u, state.nodes[u].output if state.nodes[u].status == SUCCEEDED else "(skipped)")
                   for u in spec.depends_on]  # fmt: skip
        prompt = system + user_prompt(spec, instructions, [], remembered)
        headers = sum(len(f"\n\nOutput of {u}:\n") for u, _ in outputs)
        profile = ctx.limits.shard(spec.id.split("_", 1)[0])
        return fit_upstream(outputs, upstream_room(profile, ctx.limits.context_window, len(prompt) + headers))

    def _recall(self, state: RunState, instructions: str) -> list[tuple[str, str]]:
        """What memory holds for an agent: the run's notes, the most recent long-term entries and the vector
        entries most similar to its instructions (``memory.recall`` of each stored tier)."""
        remembered = list(state.notes.items())
        if self.driver.memory is not None and self.driver.options.memory_recall:
            limit = self.driver.options.memory_recall
            remembered += self.driver.memory.long_term(limit)
            for key, _ in self.driver.memory.similar(instructions, limit):
                remembered.append((key, self.driver.memory.text(key) or ""))
        return remembered

    async def _conclude(self, attempt: Attempt, conclusion: Conclusion) -> None:
        """The attempt ended without a pause on the way: report it to the guards, then complete it (its memory
        written first), fail it or pause."""
        ctx, spec = attempt.ctx, attempt.spec
        agent, usage = spec.id, conclusion.usage()
        before = self.driver.store.known_state(ctx.run_id)  # the run's earlier attempts, from its log (read first:
        total = dict(before.usage)  # AgentFailed below already counts this one), and those this turn has not written
        for queued in ctx.log.queued():
            add_usage(total, getattr(queued, "usage", None))
        total = {key: total[key] + usage[key] for key in usage}
        answered = Answered(conclusion.model if conclusion.fallbacks else None, list(conclusion.fallbacks),
                            conclusion.archived or None)  # fmt: skip
        answer = Answer(conclusion.surface, conclusion.model or self.driver.backend_for(ctx, spec).name,
                        conclusion.signals, tuple(conclusion.fallbacks),
                        tuple((m.op, m.key, m.value) for m in conclusion.memory),
                        (conclusion.input_tokens, conclusion.output_tokens,
                         round(usage["seconds"] * 1000)))  # fmt: skip
        spent = Spent(int(total["input_tokens"] + total["output_tokens"]), total["seconds"], total["cost"],
                      before.wall_seconds(datetime.now(UTC)))  # fmt: skip
        pause = ctx.guards.finished(agent, conclusion.status_tag, conclusion.bypass, conclusion.executed,
                                    conclusion.error, answer, spent, error_kind=conclusion.error_kind)  # fmt: skip
        if conclusion.error is not None and pause is None:  # a hard error the policy does not pause on: still failed
            failed = ev.AgentFailed(error=conclusion.error, output=conclusion.surface, usage=usage,
                                    model=answered.model, fallbacks=answered.fallbacks, archived=answered.archived,
                                    warnings=conclusion.shown_warnings())  # fmt: skip
            ctx.log.emit(failed.leaving_out(*Answered.KEYS, "warnings"), agent)
        if pause:
            said = Said(conclusion.surface, conclusion.reasoning(), usage, conclusion.error, answered,
                        conclusion.shown_warnings())  # fmt: skip
            self.request_approval(ctx, agent, pause, "finished", said)
        elif self.cortex_actions(ctx, agent):
            return
        elif conclusion.error is None:
            if self.driver.memory is not None:  # the stored tiers; the run's notes live in its log (AgentCompleted)
                self.driver.memory.commit(conclusion.memory)
            completed = ev.AgentCompleted(output=conclusion.surface, status_tag=conclusion.status_tag,
                                          thinking=conclusion.reasoning(), usage=usage, model=answered.model,
                                          fallbacks=answered.fallbacks, archived=answered.archived,
                                          memory=[m.model_dump() for m in conclusion.memory],
                                          warnings=conclusion.shown_warnings())  # fmt: skip
            await ctx.log.emit_at_turn_end(completed.leaving_out(*Answered.KEYS, "memory", "warnings"), agent)
            self.cortex_actions(ctx, agent)

    @staticmethod
    def _kind(state: RunState, upstream: str) -> str:
        node = state.nodes[upstream]
        if node.status == SKIPPED:
            return "skipped"
        if node.status_tag == "null":
            return "null"
        return "content" if node.output.strip() else "empty"

    def cortex_actions(self, ctx: RunContext, agent: str) -> bool:
        """Interrupts abort the run; spawned agents join it. True when the run was aborted."""
        if not ctx.policy.acting:
            return False
        interrupts = ctx.guards.interrupts()
        if interrupts:  # every interrupt that fired is reported; none is chosen over another
            reason = "; ".join(dict.fromkeys(r for _, r in interrupts))
            agents = {a for a, _ in interrupts if a}
            by = agents.pop() if len(agents) == 1 else agent
            fired = [{"agent": a, "reason": r} for a, r in interrupts]
            ctx.log.emit(ev.RunAborted(reason=reason, by="cortex", interrupts=fired), by)
            return True
        state = self.driver.store.known_state(ctx.run_id)  # spawned agents are this driver's own
        for pattern_id, _ in ctx.guards.spawns():
            pattern = next(p for p in ctx.policy.patterns if p.id == pattern_id)
            assert pattern.action.spawn_agent is not None
            spec = pattern.action.spawn_agent.agent
            if spec.id not in state.nodes:
                ctx.workflow.agents.append(spec)
                ctx.guards.add_agent(ctx.workflow, spec.id)
                if ctx.flows is not None:
                    ctx.guards.flow_tools(ctx.flows.agent_facts(spec))
                ctx.log.emit(ev.NodeCreated(agent=spec.id, spec=spec.model_dump()))
        return False

    def request_approval(
        self,
        ctx: RunContext,
        agent: str,
        pause: PauseDecision,
        checkpoint: str,
        said: Said = NOTHING_SAID,
        held_call: int | None = None,
        *,
        failed: bool = False,
    ) -> None:
        """A breaker tripped at ``checkpoint``: the agent fails — ``AgentFailed`` with the error (a hard error's, or
        the reason the pause leads with), the recovery hint and what the attempt had ``said``, unless it already
        failed (``failed``) — and, unless a cortex pattern on that aborts the run, the pause becomes an
        ``ApprovalRequested`` with what the rules now derive. ``held_call`` is the ToolCall the pause holds (it
        answers that call: nothing ran)."""
        if not failed:
            answered = said.answered
            tripped = ev.AgentFailed(error=said.error or pause.first.reason, recovery_hint=pause.hint,
                                     category=pause.first.category, output=said.output, usage=said.usage,
                                     model=answered.model, fallbacks=answered.fallbacks,
                                     archived=answered.archived, warnings=said.warnings)  # fmt: skip
            ctx.log.emit(tripped.leaving_out("usage", *Answered.KEYS, "warnings"), agent)
            pause = ctx.guards.pause(agent, checkpoint) or pause  # patterns on AgentFailed may add to it
        if self.cortex_actions(ctx, agent):
            return
        first, approvals = pause.first, pause.approvals
        requested = ev.ApprovalRequested(
            category=first.category, reason=first.reason, hint=pause.hint,
            reasons=[ev.ShownReason(category=a.category, reason=a.reason) for a in approvals], output=said.output,
            thinking=said.thinking, why=ctx.guards.why(agent, first), policy=ctx.policy.digest, held_call=held_call)
        ctx.log.emit(requested.leaving_out("held_call"), agent)

    async def _invoke(self, attempt: Attempt) -> Conclusion:
        """The agent's conversation: a round of streaming, then (if the packet requests tools) a round of tools whose
        results go back to the model, until it answers without requesting tools or the rounds run out (the system
        prompt is the attempt's: the context window was fitted around it)."""
        ctx, spec, remembered = attempt.ctx, attempt.spec, attempt.remembered
        prompt = user_prompt(spec, attempt.instructions, attempt.upstream, remembered)
        conversation = Conversation(spec, _agent_validator(), envelope_schema(spec),
                                [{"role": "system", "content": attempt.system},
                                 {"role": "user", "content": prompt}])  # fmt: skip
        conversation.journal_scope, conversation.remembered = attempt.journal_scope, list(remembered)
        conclusion = Conclusion()
        profile = ctx.limits.shard(spec.id.split("_", 1)[0])  # coder_x → the coder profile, else main
        conversation.temperature = profile.temperature
        for round_number in range(1, self.driver.options.max_rounds + 1):
            try:
                check_context(profile, "\n".join(m["content"] for m in conversation.messages))
            except ContextBudgetError as exc:
                conclusion.error, conclusion.error_kind = f"the prompt is too long: {exc}", "prompt_too_long"
                return conclusion
            backends = self.driver.backends_for(ctx, spec)
            gated = await ctx.rounds.stream_round(backends, conversation, (attempt.number, round_number), conclusion,
                                                  profile.max_execution_time_sec)  # fmt: skip
            if gated is None:
                return conclusion
            valid, problems = tool_requests(gated.packet.packet) if gated.packet and gated.packet.packet else ([], [])
            if problems:
                conclusion.error = "the model's tool requests are malformed: " + "; ".join(problems)
                conclusion.error_kind = "tool_requests"
                return conclusion
            requests = [Request.of(r) for r in valid]
            if not requests or round_number == self.driver.options.max_rounds:
                tags = answer_tags(gated.surface)
                conclusion.status_tag, conclusion.bypass = tags.status, tags.bypass
                return conclusion
            if not self.driver.tool_round(ctx, conversation, gated, requests, conclusion):
                return conclusion
        return conclusion


@functools.cache
def _agent_validator() -> UpdateValidator:
    """The validator of an agent's model-written updates, against the shipped agent policy's declarations: built
    once per process, not once per conversation — it holds no state of its own, the policy files are the package's,
    and finding and building it cost a third of a millisecond per node (bench/runtime)."""
    return update_validator(load_program(AGENT_POLICY).analyze())
