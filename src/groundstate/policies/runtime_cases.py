"""Run a test file's cases against a run's guard rules — the shipped ``guards.mg`` with the file's guard rules,
cortex patterns and disabled guards, pinned as ``run`` pins a new run's policy — at the checkpoint each case names: a
tool call before it runs (``tool_call``) or the end of an attempt (``finished``). Each case is judged in a guard
kernel of its own (one agent, one attempt), so no case sees another's facts."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..kernel import ARGUMENT_IS_PAYLOAD, fired_rules
from ..runtime import (
    AGENT_STARTED,
    TOOL_CALL,
    Answer,
    GuardKernel,
    Invocation,
    PinnedPolicy,
    RuleOrigins,
    RunFlows,
    RunState,
    guard_rule_parts,
    load_patterns,
    natures,
    parse_workflow,
)
from .cases import Case, CaseFile
from .mcp_cases import CaseResult, Coverage

RUN = "run-policy-test"


@dataclass(frozen=True)
class Checkpoint:
    """What a runtime case reports: the agent, the checkpoint and its facts."""

    agent: str
    checkpoint: str  # tool_call or finished
    tool: str = ""
    argument: str = ""
    content: str | None = None
    output: str = ""
    status: str = "success"
    error: str | None = None
    error_kind: str = "failure"
    request: str = "the case"  # the agent's instructions: the workflow's request
    earlier: tuple[tuple[str, str, str], ...] = ()  # (tool, argument, result) of the attempt's earlier calls


def run_runtime_cases(cases: CaseFile, coverage: Coverage | None = None) -> list[CaseResult]:
    """Judge each case at its checkpoint: ``deny`` (a tool call the rules on flows refuse, with why), ``pause`` (its
    reasons ``category: reason``, the leading one first), ``abort`` (a cortex pattern's interrupt) or
    ``continue``."""
    parts = guard_rule_parts(cases.rules, cases.disabled_guards)
    policy = PinnedPolicy.of("\n".join(text for _, text, _ in parts),
                             load_patterns(*cases.patterns, disabled=cases.disabled_patterns))  # fmt: skip
    origins = RuleOrigins(parts) if coverage is not None else None
    results = []
    for case in cases.cases:
        assert case.checkpoint is not None
        results.append(_judged(policy, case, case.checkpoint, coverage, origins))
    return results


def _count(coverage: Coverage, origins: RuleOrigins, guards: GuardKernel) -> None:
    """The rules of the run's pinned guard rules (shipped and yours; not the agent kernel's, which a run's guard
    kernel also holds) and those that fired at the case's checkpoint."""
    pinned = {rule.head.pos.source for rule in guards.kernel.engine.analyzed.rules
              if Path(rule.head.pos.source).name == "guards.mg"}  # fmt: skip
    for rule in guards.kernel.engine.analyzed.rules:
        if rule.head.pos.source in pinned:
            coverage.rules.setdefault(origins.of(rule.head.pos.line), rule.head.predicate)
    coverage.fired.update(origins.of(line) for source, line in fired_rules(guards.kernel) if source in pinned)


def _judged(policy: PinnedPolicy, case: Case, point: Checkpoint, coverage: Coverage | None = None,
            origins: RuleOrigins | None = None) -> CaseResult:  # fmt: skip
    workflow = parse_workflow(f"name: policy-test\nagents:\n  - id: {point.agent}\n"
                              f"    instructions: {json.dumps(point.request)}\n"
                              "    tools: [write_file, read_file, execute_python, web_search]\n")  # fmt: skip
    refusals: list[str] = []
    with tempfile.TemporaryDirectory(prefix="groundstate-policy-test-") as folder:
        (Path(folder) / "workspace").mkdir()
        guards = GuardKernel(RUN, workflow, Path(folder) / "workspace", policy, Path(folder) / "pinned")
        flows = RunFlows(workflow, natures(workflow, {}, {}))
        guards.flow_tools(flows.tool_facts())
        guards.preflight(point.agent, {}, 0)
        guards.event(1, AGENT_STARTED, point.agent)  # the events the runtime reports on the way, as it does
        if point.checkpoint == "tool_call":
            guards.event(2, TOOL_CALL, point.agent)
            code = point.tool in ARGUMENT_IS_PAYLOAD  # its argument is its payload, as the runtime reads it
            target, payload = ("", point.argument) if code else (point.argument, point.content or "")
            flowed = flows.call(_state(point), point.agent, 2, point.tool, target, payload)
            pause = guards.tool_call(point.agent, 2, point.tool, point.argument, point.content, flows=flowed)
            refusals = guards.refusals(point.agent, 2)
        else:
            pause = guards.finished(point.agent, point.status, None, [], point.error, Answer(output=point.output),
                                    error_kind=point.error_kind)  # fmt: skip
        interrupts = guards.interrupts() if pause is None else []
        if coverage is not None and origins is not None:
            _count(coverage, origins, guards)
    if refusals:  # a refused call does not run, whatever else would pause for it
        return CaseResult(case, "deny", refusals, "")
    if interrupts:  # a cortex pattern's interrupt: the run is aborted before anything more happens
        return CaseResult(case, "abort", list(dict.fromkeys(reason for _, reason in interrupts)), "")
    if pause is None:
        return CaseResult(case, "continue", [], "")
    reasons = [f"{approval.category}: {approval.reason}" for approval in pause.approvals]
    first = f"{pause.first.category}: {pause.first.reason}"
    return CaseResult(case, "pause", [first, *[r for r in reasons if r != first]], "")


def _state(point: Checkpoint) -> RunState:
    """The run as its log would tell it at the case's call: the agent's earlier calls of the attempt, with results."""
    state = RunState(RUN)
    calls = [{"seq": 100 + number, "tool": tool, "target": argument, "output": result}
             for number, (tool, argument, result) in enumerate(point.earlier)]  # fmt: skip
    state.nodes[point.agent] = Invocation(point.agent, tools=calls)
    return state
