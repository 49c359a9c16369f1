"""Shadow rules for runs: ``[policy] shadow`` names a candidate's guard files, decided beside the run's pinned policy
at every checkpoint and never obeyed.

``ShadowedGuards`` is the run's guard kernel with a second one beside it — the shipped guard rules and flows plus the
candidate's files, in place of ``[policy] guards``, over the same cortex patterns and the same facts. Every report
goes to both; at each checkpoint (pre-flight, a tool call, the end of an attempt, a resume) the two decisions are
compared: go on, pause (with its category and reason) or refuse the call (with its reason). When they differ, the
disagreement waits in ``pending`` for the run's next event (the runner writes it as ``ShadowDisagreed`` in the same
transaction) — the log, the Prometheus counter and the run's page show it. The candidate is the driving process's,
not the run's pin: it changes nothing the run does, so a resumed run is shadowed by whatever candidate is configured
then. A candidate that fails to evaluate is a disagreement (``error``), never an error of the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import GroundstateError
from .guards import Answer, Fact, GuardKernel, PauseDecision, Spent
from .policy import PinnedPolicy
from .workflow import Workflow

Decision = tuple[str, str]  # ("go" | "pause" | "deny" | "error", what it says)


def decided(pause: PauseDecision | None, refusals: list[str] | None = None) -> Decision:
    """A checkpoint's outcome as the two policies are compared on it."""
    if refusals:
        return "deny", refusals[0]
    if pause is not None:
        return "pause", f"{pause.first.category}: {pause.first.reason}"
    return "go", ""


class ShadowedGuards(GuardKernel):
    """The run's guard kernel (obeyed) with the candidate's (``shadow``) decided beside it."""

    def __init__(self, run_id: str, workflow: Workflow, workspace: Path, policy: PinnedPolicy, pinned_dir: Path,
                 budgets: dict[str, float] | None, candidate: PinnedPolicy) -> None:  # fmt: skip
        super().__init__(run_id, workflow, workspace, policy, pinned_dir, budgets)
        self.candidate = candidate
        self.shadow: GuardKernel | None = GuardKernel(run_id, workflow, workspace, candidate, pinned_dir, budgets)
        self.pending: list[dict[str, Any]] = []  # disagreements not yet in the log
        self._said: dict[str, tuple[Decision, Decision]] = {}  # per agent: the disagreement of this attempt said last

    def take_pending(self) -> list[dict[str, Any]]:
        """The disagreements since the last call, for the run's next event batch."""
        taken, self.pending = self.pending, []
        return taken

    def _mirror(self, report: str, *arguments: Any, **options: Any) -> Any:
        """The same report to the candidate; its failure is recorded, and the candidate is dropped (its facts no
        longer follow the run's)."""
        if self.shadow is None:
            return None
        try:
            return getattr(self.shadow, report)(*arguments, **options)
        except GroundstateError as exc:
            self.pending.append({"agent": arguments[0] if arguments and isinstance(arguments[0], str) else None,
                                 "checkpoint": report, "decision": "go", "reason": "",
                                 "shadow": "error", "shadow_reason": str(exc)[:500],
                                 "candidate": self.candidate.digest})  # fmt: skip
            self.shadow = None
            return None

    def _compare(self, agent: str, checkpoint: str, enforced: Decision, shadow: Decision | None) -> None:
        """A disagreement is said once per attempt: a candidate's pause the later checkpoints of the same attempt
        still derive (its facts stay until the attempt ends) is the same disagreement, not another."""
        if checkpoint == "preflight":
            self._said.pop(agent, None)
        if shadow is None or shadow == enforced or self._said.get(agent) == (enforced, shadow):
            return
        self._said[agent] = (enforced, shadow)
        self.pending.append({"agent": agent, "checkpoint": checkpoint, "decision": enforced[0],
                             "reason": enforced[1], "shadow": shadow[0], "shadow_reason": shadow[1],
                             "candidate": self.candidate.digest})  # fmt: skip

    # -- reports that decide nothing: to both ------------------------------------------------------------
    def mcp_tools(self, tools: list[tuple[str, str, str, bool]]) -> None:
        super().mcp_tools(tools)
        self._mirror("mcp_tools", tools)

    def flow_tools(self, facts: list[Fact]) -> None:
        super().flow_tools(facts)
        self._mirror("flow_tools", facts)

    def add_agent(self, workflow: Workflow, agent_id: str) -> None:
        super().add_agent(workflow, agent_id)
        self._mirror("add_agent", workflow, agent_id)

    def event(self, seq: int, event_type: str, agent: str | None) -> None:
        super().event(seq, event_type, agent)
        self._mirror("event", seq, event_type, agent)

    # -- checkpoints: decided by both, compared -------------------------------------------------------------
    def preflight(self, agent: str, upstream: dict[str, str], files: int,
                  cut: list[tuple[str, int, int]] | None = None) -> PauseDecision | None:  # fmt: skip
        pause = super().preflight(agent, upstream, files, cut)
        shadow = self._mirror("preflight", agent, upstream, files, cut)
        self._compare(agent, "preflight", decided(pause), decided(shadow) if self.shadow is not None else None)
        return pause

    def tool_call(self, agent: str, seq: int, tool: str, argument: str, content: str | None = None,
                  approved: list[tuple[str, str]] | None = None,
                  flows: tuple[str, list[Fact]] | None = None) -> PauseDecision | None:  # fmt: skip
        pause = super().tool_call(agent, seq, tool, argument, content, approved, flows)
        shadow = self._mirror("tool_call", agent, seq, tool, argument, content, approved, flows=flows)
        if self.shadow is not None:
            self._compare(agent, "tool_call", decided(pause, self.refusals(agent, seq)),
                          decided(shadow, self.shadow.refusals(agent, seq)))  # fmt: skip
        return pause

    def in_doubt(self, agent: str, calls: list[tuple[str, str]]) -> PauseDecision | None:
        pause = super().in_doubt(agent, calls)
        shadow = self._mirror("in_doubt", agent, calls)
        self._compare(agent, "resume", decided(pause), decided(shadow) if self.shadow is not None else None)
        return pause

    def finished(self, agent: str, status_tag: str, bypass: str | None, executed: list[str], error: str | None,
                 answer: Answer | None = None, spent: Spent | None = None,
                 error_kind: str = "failure") -> PauseDecision | None:  # fmt: skip
        pause = super().finished(agent, status_tag, bypass, executed, error, answer, spent, error_kind)
        shadow = self._mirror("finished", agent, status_tag, bypass, executed, error, answer, spent, error_kind)
        self._compare(agent, "finished", decided(pause), decided(shadow) if self.shadow is not None else None)
        return pause
