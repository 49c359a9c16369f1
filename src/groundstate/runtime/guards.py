"""The run's guard kernel: the runtime reports what happened as facts; guards.mg and the compiled cortex patterns
derive ``needs_approval``, ``interrupt`` and ``spawn_agent``; the runtime obeys.

Facts about an agent's attempt (pre-flight, tool calls, status, errors, its events) are retracted when the agent
starts again, so a decision is never re-derived from an attempt the operator already dealt with.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..kernel import Kernel, PolicyInvariantError, Transaction, why_row
from ..logic import INT64_MAX, AnalyzedProgram, Float, LogicError, Name
from ..provenance import shared_rules
from .backends import Signals
from .cortex import pattern_reasons
from .policy import PinnedPolicy
from .workflow import Workflow

Fact = tuple[str, tuple[Any, ...]]

# What a run pinned before guards.mg declared its facts' lifetimes (``attempt()``) retracts between attempts: its
# pinned rules say nothing, and these are the facts that code reported per attempt
PINNED_BEFORE_LIFETIMES = (
    "preflight", "finished", "status_tag", "bypass", "tool_executed", "hard_error", "tool_call", "upstream_output",
    "upstream_files", "model_refused", "native_tool_call", "finish_reason", "agent_output", "agent_output_digest",
    "agent_model", "tool_content", "tool_content_digest", "model_fallback", "memory_write",
    "upstream_truncated", "agent_usage", "tool_in_doubt", "current_call", "approved_reason", "error_kind",
)  # fmt: skip
MAX_FACT_TEXT = 2000  # characters of a refusal or tool name kept in a fact (the recording keeps the stream)
MAX_CONTENT_TEXT = 16_000  # characters of an output or a write's content kept in a fact; beyond, a digest of it all


@dataclass(frozen=True)
class Approval:
    category: str  # "safety" or "quality"
    reason: str


@dataclass(frozen=True)
class PauseDecision:
    """What guards.mg says about a checkpoint that pauses: the approval it leads with (``pause_leads_with``) and
    every approval pausing there (``pauses_now``), as the rules derived them — Python neither filters nor orders."""

    first: Approval
    approvals: list[Approval]
    hint: str = ""  # what the operator can do (``pause_hint``: the leading cause's hint, else the category's)


@dataclass(frozen=True)
class Answer:
    """What the model sent in an attempt, beside its status: its surface output, the model that answered (and the
    fallbacks that failed before it), the memory operations it asks for (op, key, value), its other signals."""

    output: str = ""
    backend: str | None = None
    signals: Signals | None = None
    fallbacks: tuple[dict[str, str], ...] = ()
    memory: tuple[tuple[str, str, str], ...] = ()
    usage: tuple[int, int, int] | None = None  # the attempt's input tokens, output tokens, milliseconds


@dataclass(frozen=True)
class Spent:
    """What the run has spent so far, this attempt included (its budgets are judged on it)."""

    tokens: int  # input + output, as providers counted them
    seconds: float  # in attempts
    cost: float  # by the run's price table (0 for models without a price)
    wall_seconds: float  # running, pauses excluded


def attempt_facts(analyzed: AnalyzedProgram) -> tuple[str, ...]:
    """The facts of one attempt, as the rules declare them (``attempt()`` in a Decl): retracted when the agent's next
    attempt begins. Rules that declare none were pinned before lifetimes were declared: the facts that code
    retracted."""
    declared = tuple(sorted(name for name, info in analyzed.predicates.items()
                            if info.decl is not None and info.decl.descriptor("attempt") is not None))  # fmt: skip
    return declared or PINNED_BEFORE_LIFETIMES


def defaults_dir() -> Path:
    return Path(str(resources.files("groundstate.runtime") / "defaults"))


def guard_rules(files: list[Path], disabled: Sequence[str] = ()) -> str:
    """The shipped guard rules followed by the user's guard files (each checked now, so a bad file is refused with
    its own file and line before any run is created or driven) and a ``guard_disabled`` fact for each shipped breaker
    the configuration disables explicitly (``policy.disable_guards``; a name no shipped breaker has is refused)."""
    return "\n".join(text for _, text, _ in guard_rule_parts(files, disabled))


def guard_rule_parts(files: list[Path], disabled: Sequence[str] = ()) -> list[tuple[str, str, int]]:
    """The parts ``guard_rules`` joins, in order: (where it comes from — a shipped file's name, your file's path,
    ``disable_guards`` —, its text, how many lines precede the file's own first line), so a line of the pinned rules
    can be named by its file and line (a policy test's coverage)."""
    import tempfile

    shipped = [defaults_dir() / "guards.mg", *shared_rules()]  # the breakers; the flows and writes they obey
    with tempfile.TemporaryDirectory() as empty:
        kernel = Kernel(Path(empty), extra_sources=[*shipped, *files])  # LogicError naming the file and line
    names = {str(name).lstrip("/") for (name,) in kernel.query("shipped_guard(N)")}
    unknown = sorted(set(disabled) - names)
    if unknown:
        raise ConfigurationError(f"policy.disable_guards: {', '.join(unknown)}: no shipped breaker has that name "
                                 f"(shipped: {', '.join(sorted(names))})")  # fmt: skip
    parts = [(file.name, file.read_text(encoding="utf-8"), 0) for file in shipped]
    parts += [(str(file), f"# from {file}\n{file.read_text(encoding='utf-8')}", 1) for file in files]
    if disabled:
        lines = ["# disabled by the configuration (policy.disable_guards)"]
        lines += [f"guard_disabled(/{name})." for name in sorted(set(disabled))]
        parts.append(("disable_guards", "\n".join(lines), 1))
    return parts


class RuleOrigins:
    """Where a line of pinned guard rules (``guard_rule_parts`` joined) comes from: the shipped file or yours, and
    its line there — a derivation or a coverage report names that, not the pinned copy's line."""

    def __init__(self, parts: list[tuple[str, str, int]]) -> None:
        self.starts: list[tuple[int, str, int]] = []  # (first pinned line of the part, origin, header lines)
        line = 1
        for origin, text, header in parts:
            self.starts.append((line, origin, header))
            line += text.count("\n") + 1

    def of(self, line: int) -> tuple[str, int]:
        """(origin, line there) of the pinned rules' ``line``."""
        start, origin, header = max(entry for entry in self.starts if entry[0] <= line)
        return origin, line - start + 1 - header


def pinned_file(folder: Path, name: str, text: str) -> Path:
    """A pinned policy file, stored by its content under ``folder`` (``DIGEST/NAME``: written once, never changed):
    runs pinned to the same policy load the same file, so the kernel's parse of it is shared by them."""
    path = folder / hashlib.sha256(text.encode()).hexdigest()[:24] / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{name}.{os.getpid()}.tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)  # whole or not at all, even with drivers on other nodes writing the same file
    return path


class GuardKernel:
    """A run's guard kernel: the pinned guard rules and compiled cortex patterns over what the runtime reports at
    each checkpoint (pre-flight, a tool call, the end of an attempt, a resume); ``pause`` is what the rules say."""

    def __init__(
        self,
        run_id: str,
        workflow: Workflow,
        workspace: Path,
        policy: PinnedPolicy,
        pinned_dir: Path,
        budgets: dict[str, float] | None = None,
        time_limit: float | None = None,
    ) -> None:
        """``time_limit``: seconds one evaluation may take — for rules decided beside the run's (a shadow candidate,
        a replay), never for the run's own."""
        self.run_id = run_id
        sources = [pinned_file(pinned_dir, "guards.mg", policy.guards),
                   pinned_file(pinned_dir, "cortex.mg", policy.compiled_patterns)]  # fmt: skip
        self.kernel = Kernel(workspace, extra_sources=sources, time_limit=time_limit)
        # the agents that may have an attempt's facts in the kernel (any the policy files state, then every agent
        # this kernel is told about): an agent's first pre-flight has nothing to forget and skips ~30 lookups
        self.attempt_facts = attempt_facts(self.kernel.engine.analyzed)
        self._attempt_fact = frozenset(self.attempt_facts)  # asked of every fact an attempt reports
        self._attempted: set[str] = {str(row[1]) for p in self.attempt_facts for row in self.kernel.match(p, run_id)}
        self._attempted.update(str(row[3]) for row in self.kernel.match("event", run_id))
        # a run pinned before flows.mg was shipped has no rules on flows: its calls are not reported to them
        self.judges_flows = "flow_call" in self.kernel.engine.analyzed.predicates
        self._flows: dict[str, list[Fact]] = {}  # per agent: the flow facts of the call checked last
        with self.kernel.transaction() as tx:
            tx.assert_("cortex_reason", *pattern_reasons(list(policy.patterns)))  # values, never rule text
            for role in workflow.roles:  # the workflow's roles are the only source of what a role must do
                for tool in role.mandatory_tools:
                    tx.assert_("mandatory_tool", (Name.of(role.prefix), Name.of(tool)))
            for agent in workflow.agents:
                self._agent_facts(tx, workflow, agent.id)
            for kind, limit in (budgets or {}).items():  # recorded in the run when it was created
                if kind == "max_cost":
                    tx.assert_("run_cost_budget", (self.run_id, Float(limit)))
                else:
                    tx.assert_("run_budget", (self.run_id, Name.of(kind), math.ceil(limit)))

    def mcp_tools(self, tools: list[tuple[str, str, str, bool, bool]]) -> None:
        """The MCP tools the run's agents may use: (agent's name for it, server, tool, read-only, may destroy data —
        as the server's annotations say, ``providers.tool_hints``). Rules pinned before writes.mg was shipped know
        no destructive tools: they are not told of any."""
        destructive_known = "mcp_tool_destructive" in self.kernel.engine.analyzed.predicates
        with self.kernel.transaction() as tx:
            for name, server, tool, read_only, destructive in tools:
                tx.assert_("mcp_tool_of", (Name.of(name), server, tool))
                if read_only:
                    tx.assert_("mcp_tool_read_only", (Name.of(name),))
                if destructive and destructive_known:
                    tx.assert_("mcp_tool_destructive", (Name.of(name),))

    def flow_tools(self, facts: list[Fact]) -> None:
        """What the run's tools are, as flows.mg reads them (``runtime/flows.py``: flow_tool, flow_read_only,
        flow_open_world, flow_label, flow_carries)."""
        if self.judges_flows and facts:
            with self.kernel.transaction() as tx:
                for predicate, row in facts:
                    tx.assert_(predicate, row)

    def add_agent(self, workflow: Workflow, agent_id: str) -> None:
        """An agent a cortex pattern spawned: its role and dependencies become facts."""
        with self.kernel.transaction() as tx:
            self._agent_facts(tx, workflow, agent_id)

    def _agent_facts(self, tx: Transaction, workflow: Workflow, agent_id: str) -> None:
        agent, role = workflow.agent(agent_id), workflow.role(agent_id)
        tx.assert_("run_agent", (self.run_id, agent_id, Name.of(role.prefix if role else "unknown_")))
        for upstream in agent.depends_on:
            tx.assert_("agent_depends", (self.run_id, agent_id, upstream))

    # -- reporting ---------------------------------------------------------------------------------------
    def event(self, seq: int, event_type: str, agent: str | None) -> None:
        """An event of the run's log, as a fact the patterns match on."""
        from .run_events import mangle_name

        self._attempted.add(agent or "")
        self.kernel.assert_facts("event", (self.run_id, seq, Name(mangle_name(event_type)), agent or ""))

    def preflight(
        self, agent: str, upstream: dict[str, str], files: int, cut: list[tuple[str, int, int]] | None = None
    ) -> PauseDecision | None:
        """A new attempt: the previous attempt's facts go and the pre-flight facts come, in one evaluation
        (``cut``: the upstream outputs the context window shortens, with the characters kept and their length)."""
        with self.kernel.transaction() as tx:
            self._forget_attempt(tx, agent)
            self._attempted.add(agent)
            for name, kind in upstream.items():
                self._attempt(tx, "upstream_output", (self.run_id, agent, name, Name.of(kind)))
            for name, kept, total in cut or []:
                self._attempt(tx, "upstream_truncated", (self.run_id, agent, name, kept, total))
            self._attempt(tx, "upstream_files", (self.run_id, agent, files))
            self._attempt(tx, "preflight", (self.run_id, agent))
        return self.pause(agent, "preflight")

    def tool_call(
        self,
        agent: str,
        seq: int,
        tool: str,
        argument: str,
        content: str | None = None,
        approved: list[tuple[str, str]] | None = None,
        flows: tuple[str, list[Fact]] | None = None,
    ) -> PauseDecision | None:
        """A requested call, before it runs: its tool, argument and (for writes) content become facts, and it is the
        ``current_call``. ``approved``: it is identical to a call an operator let through by retrying the pause that
        held it, and these (category, reason) are what they saw then (``approved_reason``). ``flows``: the call's
        name in flows.mg and the facts of where its values came from (``RunFlows.call``), which hold while it is
        the agent's current call; ``refusals`` reads what flows.mg refuses."""
        previous, current = self._flows.pop(agent, []), []
        try:
            with self.kernel.transaction() as tx:
                self._attempted.add(agent)
                tx.retract("current_call", *self.kernel.match("current_call", self.run_id, agent))
                self._attempt(tx, "current_call", (self.run_id, agent, seq))
                for predicate, row in previous:  # the previous call's flows are about that call alone
                    tx.retract(predicate, row)
                if flows is not None and self.judges_flows:
                    name, facts = flows
                    current = [("call_flow", (self.run_id, agent, seq, name)), *facts]
                    for predicate, row in current:
                        tx.assert_(predicate, row)
                for category, reason in approved or []:
                    self._attempt(tx, "approved_reason", (self.run_id, agent, seq, Name.of(category), reason))
                self._attempt(tx, "tool_call", (self.run_id, agent, seq, Name.of(tool), argument))
                if content is not None:
                    text, digest = _bounded(content)
                    self._attempt(tx, "tool_content", (self.run_id, agent, seq, text))
                    if digest:
                        self._attempt(tx, "tool_content_digest", (self.run_id, agent, seq, digest))
        except LogicError:  # the kernel is as it was (Kernel.apply undoes the transaction): so is the bookkeeping
            self._flows[agent] = previous
            raise
        if current:
            self._flows[agent] = current
        return self.pause(agent, "tool_call")

    def refusals(self, agent: str, seq: int) -> list[str]:
        """Why flows.mg refuses the agent's call ``seq`` (checked last by ``tool_call``); empty: it may run."""
        return [str(row[3]) for row in self.kernel.match("tool_call_refused", self.run_id, agent, seq, sort=True)]

    def why_refused(self, agent: str, seq: int, reason: str) -> dict[str, Any]:
        """The rules and facts that refused the call (its derivation names the earlier call whose result the value
        came from), as a tree kept in the call's ToolResult."""
        return why_row(self.kernel, "tool_call_refused", self.run_id, agent, seq, reason).to_json()

    def _forget_flows(self, tx: Transaction, agent: str) -> None:
        """The flow facts of the agent's previous call go: they are about that call alone."""
        for predicate, row in self._flows.pop(agent, []):
            tx.retract(predicate, row)

    def in_doubt(self, agent: str, calls: list[tuple[str, str]]) -> PauseDecision | None:
        """The run resumes and the tool journal holds ``calls`` (tool, target) of the agent that were running when the
        driver stopped: they become facts; the rules say whether (and why) the run pauses."""
        with self.kernel.transaction() as tx:
            self._attempted.add(agent)
            for tool, target in calls:
                self._attempt(tx, "tool_in_doubt", (self.run_id, agent, tool, _bounded(target)[0]))
        return self.pause(agent, "resume")

    def finished(
        self,
        agent: str,
        status_tag: str,
        bypass: str | None,
        executed: list[str],
        error: str | None,
        answer: Answer | None = None,
        spent: Spent | None = None,
        error_kind: str = "failure",
    ) -> PauseDecision | None:
        """The invocation ended: its outcome, what the model sent (``answer``) and what the run has spent become
        facts; a hard ``error`` with its kind (``error_kind``: transport, timeout, cut_off, ...)."""
        with self.kernel.transaction() as tx:
            self._forget_flows(tx, agent)  # a call's flows are judged at its /tool_call checkpoint only
            self._attempted.add(agent)
            if answer is not None:
                self._answer(tx, agent, answer)
            if spent is not None:
                self._spent(tx, spent)
            self._attempt(tx, "status_tag", (self.run_id, agent, Name.of(status_tag)))
            if bypass is not None:
                self._attempt(tx, "bypass", (self.run_id, agent, bypass))
            for tool in executed:
                self._attempt(tx, "tool_executed", (self.run_id, agent, Name.of(tool)))
            if error is not None:
                self._attempt(tx, "hard_error", (self.run_id, agent, error))
                self._attempt(tx, "error_kind", (self.run_id, agent, Name.of(error_kind)))
            self._attempt(tx, "finished", (self.run_id, agent))
        return self.pause(agent, "finished")

    def _answer(self, tx: Transaction, agent: str, answer: Answer) -> None:
        """The answer's facts: its surface output, the model that answered and those that failed before it, the
        memory it would write, and what it sent besides its answer."""
        text, digest = _bounded(answer.output)
        self._attempt(tx, "agent_output", (self.run_id, agent, text))
        if digest:
            self._attempt(tx, "agent_output_digest", (self.run_id, agent, digest))
        if answer.backend is not None:
            self._attempt(tx, "agent_model", (self.run_id, agent, answer.backend))
        for failed in answer.fallbacks:
            self._attempt(tx, "model_fallback", (self.run_id, agent, failed["model"], failed["error"][:MAX_FACT_TEXT]))
        if answer.usage is not None:
            self._attempt(tx, "agent_usage", (self.run_id, agent, *map(_held, answer.usage)))
        for op, key, value in answer.memory:  # applied only if the attempt completes
            self._attempt(tx, "memory_write", (self.run_id, agent, Name.of(op), key, _bounded(value)[0]))
        signals = answer.signals or Signals()
        for refusal in signals.refusals:
            self._attempt(tx, "model_refused", (self.run_id, agent, refusal[:MAX_FACT_TEXT]))
        for tool in signals.native_tool_calls:
            self._attempt(tx, "native_tool_call", (self.run_id, agent, tool[:MAX_FACT_TEXT]))
        if signals.finish is not None:
            self._attempt(tx, "finish_reason", (self.run_id, agent, Name.of(signals.finish)))

    def _spent(self, tx: Transaction, spent: Spent) -> None:
        """The run's totals, this attempt included: one row each, replaced when it changed (a row retracted and
        asserted again costs the engine a deletion and a rederivation of everything it supports)."""
        for predicate, row in (("run_usage", (_held(spent.tokens), _held(math.ceil(spent.seconds)))),
                               ("run_cost", (Float(round(spent.cost, 6)),)),
                               ("run_wall", (_held(math.ceil(spent.wall_seconds)),))):  # fmt: skip
            current, new = self.kernel.match(predicate, self.run_id), (self.run_id, *row)
            if current != [new]:
                tx.retract(predicate, *current)
                tx.assert_(predicate, new)

    def _attempt(self, tx: Transaction, predicate: str, row: tuple[Any, ...]) -> None:
        """Report a fact of the agent's current attempt — only one the rules declare as such (``attempt()``), so that
        the next attempt begins without it: an undeclared one would outlive its attempt, and is refused instead."""
        if predicate not in self._attempt_fact:
            raise PolicyInvariantError(f"the runtime reports {predicate} for one attempt of an agent, but the run's "
                                       f"guard rules do not declare it so: add attempt() to the descr of Decl "
                                       f"{predicate} in guards.mg")  # fmt: skip
        tx.assert_(predicate, row)

    def _forget_attempt(self, tx: Transaction, agent: str) -> None:
        """Retract the agent's previous attempt: its facts and its events (none before its first)."""
        self._forget_flows(tx, agent)
        if agent not in self._attempted:
            return
        for predicate in self.attempt_facts:  # looked up through the (run, agent) index: no scan, no parsing
            tx.retract(predicate, *self.kernel.match(predicate, self.run_id, agent))
        tx.retract("event", *self.kernel.match("event", self.run_id, at={3: agent}))

    # -- what the rules say ------------------------------------------------------------------------------
    def pause(self, agent: str, checkpoint: str) -> PauseDecision | None:
        """The pause guards.mg derives for this agent at this checkpoint, or None when the run goes on."""
        where = (self.run_id, agent, Name.of(checkpoint))
        leading = self.kernel.match("pause_leads_with", *where, sort=True)
        if not leading:
            return None
        [(_, _, _, category, reason)] = leading  # at most one: its Decl's fundep, held by the engine
        rows = self.kernel.match("pauses_now", *where, sort=True)
        approvals = [Approval(str(c).lstrip("/"), r) for _, _, _, c, r in rows]
        hints = self.kernel.match("pause_hint", *where, sort=True)
        if not hints:  # (never two: the Decl's fundep)
            raise PolicyInvariantError(f"pause_hint/4 derived no hint for {agent} at /{checkpoint}; the rules must "
                                       "give one for every pause")  # fmt: skip
        return PauseDecision(Approval(str(category).lstrip("/"), reason), approvals, str(hints[0][3]))

    def why(self, agent: str, approval: Approval) -> dict[str, Any]:
        """The rules and facts that derived this pause, as a tree (kept in the event: it outlives the process)."""
        found = why_row(self.kernel, "needs_approval", self.run_id, agent, Name.of(approval.category),
                        approval.reason)  # fmt: skip
        return found.to_json()

    def interrupts(self) -> list[tuple[str, str]]:
        """(agent, reason) of every cortex interrupt that fired: the run is aborted."""
        return [(a, r) for _, a, r in self.kernel.match("interrupt", self.run_id, sort=True)]

    def spawns(self) -> list[tuple[str, str]]:
        """(pattern, agent) of every agent a cortex pattern spawns."""
        return [(p, a) for _, p, a in self.kernel.match("spawn_agent", self.run_id, sort=True)]


def _held(count: int) -> int:
    """A count as a fact holds it: past the largest a fact's 64-bit integer holds (``INT64_MAX``), that largest —
    over any budget the rules compare it with (stricter, never an error: the run's total of many attempts at a
    provider's largest count would overflow, and fail every later agent)."""
    return min(count, INT64_MAX)


def _bounded(text: str) -> tuple[str, str | None]:
    """A text as a fact keeps it: whole up to MAX_CONTENT_TEXT characters; beyond, its beginning and the SHA-256 of
    all of it (so rules can still tell two long texts apart)."""
    if len(text) <= MAX_CONTENT_TEXT:
        return text, None
    return text[:MAX_CONTENT_TEXT], "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
