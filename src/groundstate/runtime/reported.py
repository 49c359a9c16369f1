"""A run's guard kernel whose every report is recorded, and decided beside by a shadow candidate when one is set.

Every report the runtime makes to the guards — a segment's start, the run's MCP tools and flow facts, a spawned agent,
an event a cortex pattern listens for, and each checkpoint (pre-flight, a tool call, the end of an attempt, a resume)
with its arguments and the decision made there — is kept as a small JSON record (``reports``) and written with the
run's next events, in the same transaction (``guard_reports``). ``replay`` feeds the same records, in order, to a
kernel under a candidate policy: ``groundstate policy replay --run`` re-decides a run's checkpoints from exactly what
its guards were told, without the model, the tools or the workspace.

``[policy] shadow`` does the same live: each record is applied to the candidate's kernel as it is made, and where
the candidate decides a checkpoint otherwise the disagreement waits in ``pending`` for the run's next events (a
``ShadowDisagreed`` event) — once per attempt: a pause the candidate still derives at the attempt's later
checkpoints is the same disagreement. The candidate is the driving process's configuration, not the run's pin; a
candidate that fails to evaluate is one disagreement (``error``) and is then dropped, never an error of the run.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from ..errors import GroundstateError
from ..logic import facts_json, facts_of_json
from .backends import Signals
from .guards import Answer, Fact, GuardKernel, PauseDecision, Spent
from .policy import PinnedPolicy
from .run_events import ShadowDisagreed
from .workflow import AgentSpec, Workflow

Decision = tuple[str, str]  # ("go" | "pause" | "deny" | "error", what it says)
SHADOW_TIME_LIMIT_S = 0.25  # one evaluation of the candidate's kernel: past it, one "error" and the shadow is dropped
REPLAY_TIME_LIMIT_S = 5.0  # one evaluation of a replay's candidate: past it, the run "could not be re-decided"
CHECKPOINTS = {"preflight": "preflight", "tool_call": "tool_call", "in_doubt": "resume", "finished": "finished"}


def decided(pause: PauseDecision | None, refusals: list[str] | None = None) -> Decision:
    """A checkpoint's outcome as two policies are compared on it."""
    if refusals:
        return "deny", refusals[0]
    if pause is not None:
        return "pause", f"{pause.first.category}: {pause.first.reason}"
    return "go", ""


def apply(kernel: GuardKernel, workflow: Workflow, method: str, arguments: Any) -> Decision | None:
    """One recorded report applied to ``kernel`` (``workflow``: the run's, for a spawned agent); the decision when it
    is a checkpoint."""
    if method == "mcp_tools":
        # (a report recorded before tools said whether they may destroy data: MCP's default for a writing tool)
        kernel.mcp_tools([(name, server, tool, bool(read_only), bool(rest[0]) if rest else not read_only)
                          for name, server, tool, read_only, *rest in arguments])  # fmt: skip
    elif method == "flow_tools":
        kernel.flow_tools(facts_of_json(arguments))
    elif method == "add_agent":
        if all(agent.id != arguments["agent"] for agent in workflow.agents):
            workflow.agents.append(AgentSpec.model_validate(arguments["spec"]))
        kernel.add_agent(workflow, arguments["agent"])
    elif method == "event":
        kernel.event(*arguments)
    elif method == "preflight":
        agent, upstream, files, cut = arguments
        return decided(kernel.preflight(agent, upstream, files, [tuple(row) for row in cut] if cut else None))
    elif method == "tool_call":
        agent, seq, tool, argument, content, approved, flows = arguments
        pause = kernel.tool_call(agent, seq, tool, argument, content,
                                 [tuple(pair) for pair in approved] if approved is not None else None,
                                 flows=(flows[0], facts_of_json(flows[1])) if flows is not None else None)  # fmt: skip
        return decided(pause, kernel.refusals(agent, seq))
    elif method == "in_doubt":
        agent, calls = arguments
        return decided(kernel.in_doubt(agent, [tuple(call) for call in calls]))
    elif method == "finished":
        agent, status_tag, bypass, executed, error, answer, spent, error_kind = arguments
        return decided(kernel.finished(agent, status_tag, bypass, executed, error, _answer(answer),
                                       Spent(**spent) if spent is not None else None, error_kind))  # fmt: skip
    else:
        raise ValueError(f"not a guard report: {method!r}")
    return None


def answer_report(answer: Answer) -> dict[str, Any]:
    """``answer`` as a report keeps it (``_answer`` reads it back), as ``dataclasses.asdict`` wrote it — which
    deep-copies every value first: 2 % of a node's time in bench/runtime. Only what may still change before the
    report is written (a list, a dict) is copied here; a field added to Answer or Signals is written too
    (tests/runtime/test_model_signals.py reads a recorded answer back against what the provider streamed)."""
    row = _plain(answer)
    if answer.signals is not None:
        row["signals"] = _plain(answer.signals)
    return row


def _plain(value: Any) -> dict[str, Any]:
    """A dataclass's fields, each list, tuple or dict among them copied one level down (what ``asdict`` gives for
    the report's dataclasses, none of which nests further but through ``signals``)."""
    row = {}
    for field in fields(value):
        if field.metadata.get("reported") is False:  # bookkeeping (Signals.native_calls_seen)
            continue
        item = getattr(value, field.name)
        if isinstance(item, list | tuple):
            item = type(item)(dict(v) if isinstance(v, dict) else v for v in item)
        elif isinstance(item, dict):
            item = dict(item)
        row[field.name] = item
    return row


def _answer(data: dict[str, Any] | None) -> Answer | None:
    if data is None:
        return None
    signals = data.get("signals")
    return Answer(data["output"], data["backend"], Signals(**signals) if signals is not None else None,
                  tuple(data["fallbacks"]), tuple(tuple(op) for op in data["memory"]),
                  tuple(data["usage"]) if data["usage"] is not None else None)  # fmt: skip


class ReportedGuards(GuardKernel):
    """The run's guard kernel (obeyed), each report recorded, and the candidate's (``shadow``) decided beside it."""

    def __init__(self, run_id: str, workflow: Workflow, workspace: Path, policy: PinnedPolicy, pinned_dir: Path,
                 budgets: dict[str, float] | None, candidate: PinnedPolicy | None = None) -> None:  # fmt: skip
        super().__init__(run_id, workflow, workspace, policy, pinned_dir, budgets)
        self.workflow = workflow
        self.reports: list[dict[str, Any]] = [{"m": "begin", "a": [agent.id for agent in workflow.agents]}]
        self.candidate = candidate
        self.shadow = GuardKernel(run_id, workflow, workspace, candidate, pinned_dir, budgets,
                                  time_limit=SHADOW_TIME_LIMIT_S) if candidate is not None else None  # fmt: skip
        self.pending: list[ShadowDisagreed] = []  # disagreements not yet in the log
        self._said: dict[str, tuple[Decision, Decision]] = {}  # per agent: the disagreement of this attempt said last

    def take_reports(self) -> list[dict[str, Any]]:
        """The reports since the last call, for the run's next events' transaction."""
        taken, self.reports = self.reports, []
        return taken

    def give_back(self, reports: list[dict[str, Any]]) -> None:
        """Reports whose transaction failed: they go with the next one, in their order."""
        self.reports[:0] = reports

    def take_pending(self) -> list[ShadowDisagreed]:
        """The shadow's disagreements since the last call, for the run's next events."""
        taken, self.pending = self.pending, []
        return taken

    def _reported(self, method: str, arguments: Any, made: Decision | None = None) -> None:
        """Record a report; with a candidate, apply it there too and compare the decisions of a checkpoint."""
        self.reports.append({"m": method, "a": arguments, **({"d": list(made)} if made is not None else {})})
        if self.shadow is None or self.candidate is None:
            return
        agent = arguments[0] if method in CHECKPOINTS else None
        try:
            shadow = apply(self.shadow, self.workflow, method, arguments)
        except (GroundstateError, ValueError, TypeError) as exc:
            self.pending.append(ShadowDisagreed(agent=agent, checkpoint=CHECKPOINTS.get(method, method),
                                                decision=made[0] if made else "go", reason=made[1] if made else "",
                                                shadow="error", shadow_reason=str(exc)[:500],
                                                candidate=self.candidate.digest))  # fmt: skip
            self.shadow = None  # its facts no longer follow the run's
            return
        if made is None or shadow is None or agent is None:
            return
        if method == "preflight":
            self._said.pop(agent, None)
        if shadow == made or self._said.get(agent) == (made, shadow):
            return
        self._said[agent] = (made, shadow)
        self.pending.append(ShadowDisagreed(agent=agent, checkpoint=CHECKPOINTS[method], decision=made[0],
                                            reason=made[1], shadow=shadow[0], shadow_reason=shadow[1],
                                            candidate=self.candidate.digest))  # fmt: skip

    # -- reports that decide nothing ------------------------------------------------------------------------
    def mcp_tools(self, tools: list[tuple[str, str, str, bool, bool]]) -> None:
        super().mcp_tools(tools)
        self._reported("mcp_tools", [list(tool) for tool in tools])

    def flow_tools(self, facts: list[Fact]) -> None:
        super().flow_tools(facts)
        self._reported("flow_tools", facts_json(facts))

    def add_agent(self, workflow: Workflow, agent_id: str) -> None:
        super().add_agent(workflow, agent_id)
        self._reported("add_agent", {"agent": agent_id, "spec": workflow.agent(agent_id).model_dump()})

    def event(self, seq: int, event_type: str, agent: str | None) -> None:
        super().event(seq, event_type, agent)
        self._reported("event", [seq, event_type, agent])

    # -- checkpoints ----------------------------------------------------------------------------------------
    def preflight(self, agent: str, upstream: dict[str, str], files: int,
                  cut: list[tuple[str, int, int]] | None = None) -> PauseDecision | None:  # fmt: skip
        pause = super().preflight(agent, upstream, files, cut)
        self._reported("preflight", [agent, upstream, files, [list(row) for row in cut] if cut else None],
                       decided(pause))  # fmt: skip
        return pause

    def tool_call(self, agent: str, seq: int, tool: str, argument: str, content: str | None = None,
                  approved: list[tuple[str, str]] | None = None,
                  flows: tuple[str, list[Fact]] | None = None) -> PauseDecision | None:  # fmt: skip
        pause = super().tool_call(agent, seq, tool, argument, content, approved, flows)
        self._reported("tool_call", [agent, seq, tool, argument, content,
                                     [list(pair) for pair in approved] if approved is not None else None,
                                     [flows[0], facts_json(flows[1])] if flows is not None else None],
                       decided(pause, self.refusals(agent, seq)))  # fmt: skip
        return pause

    def in_doubt(self, agent: str, calls: list[tuple[str, str]]) -> PauseDecision | None:
        pause = super().in_doubt(agent, calls)
        self._reported("in_doubt", [agent, [list(call) for call in calls]], decided(pause))
        return pause

    def finished(self, agent: str, status_tag: str, bypass: str | None, executed: list[str], error: str | None,
                 answer: Answer | None = None, spent: Spent | None = None,
                 error_kind: str = "failure") -> PauseDecision | None:  # fmt: skip
        pause = super().finished(agent, status_tag, bypass, executed, error, answer, spent, error_kind)
        self._reported("finished", [agent, status_tag, bypass, list(executed), error,
                                    answer_report(answer) if answer is not None else None,
                                    _plain(spent) if spent is not None else None, error_kind], decided(pause))
        return pause
