"""Run a test file's cases against the MCP guard's policy — the shipped ``mcp.mg`` and ``flows.mg`` with the
file's rules, loaded by ``McpPolicy`` exactly as ``mcp serve`` loads ``[mcp] policy`` — and count, for coverage, the
cases in which each rule derived something."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from mcp_types import Tool, ToolAnnotations

from ..guard import History, McpPolicy
from ..kernel import fired_rules
from ..provenance import flatten
from .cases import Case, CaseFile


@dataclass(frozen=True)
class CaseResult:
    """What one case got: its decision and reasons, the derivation of the first, and whether it is what was
    expected."""

    case: Case
    decision: str
    reasons: list[str]
    why: str

    @property
    def passed(self) -> bool:
        """The decision expected, and the reasons too when the case names them."""
        expected = self.case.reasons
        return self.decision == self.case.expect and (expected is None or expected == self.reasons)


@dataclass
class Coverage:
    """Every rule of the policy (file, line, head predicate) and in how many cases it fired."""

    rules: dict[tuple[str, int], str] = field(default_factory=dict)
    fired: Counter[tuple[str, int]] = field(default_factory=Counter)

    def add_rules(self, policy: McpPolicy) -> None:
        """Count every rule of ``policy`` (none fired yet)."""
        for rule in policy.kernel.engine.analyzed.rules:
            self.rules.setdefault((rule.head.pos.source, rule.head.pos.line), rule.head.predicate)

    def unreached(self) -> list[tuple[str, int]]:
        """The rules no case fired, by file and line."""
        return sorted(where for where in self.rules if not self.fired[where])


def run_mcp_cases(cases: CaseFile, coverage: Coverage | None = None) -> list[CaseResult]:
    """Decide each case of ``cases``; with ``coverage``, count the rules that fired in each."""
    policy = McpPolicy(cases.rules)
    for server, tools in cases.tools.items():
        labels = {tool: given["labels"] for tool, given in tools.items() if given["labels"]}
        policy.add_tools(server, [_tool(name, given) for name, given in tools.items()], labels)
    if coverage is not None:
        coverage.add_rules(policy)
    results = []
    for case in cases.cases:
        fired: set[tuple[str, int]] = set()

        def observe(kernel: Any, into: set[tuple[str, int]] = fired) -> None:
            into.update(fired_rules(kernel))

        history = History()  # each case its own client session: what it was told before, the user's request
        session = history.session(case.name)
        history.declare(session, case.request)
        for number, (server, tool, result, arguments) in enumerate(case.earlier):
            history.record(session, f"earlier-{number}", server, tool, result, arguments=flatten(arguments))
        verdict = policy.decide(case.server, case.tool, case.arguments, client=case.client, in_doubt=case.in_doubt,
                                provenance=partial(history.facts, session),
                                observe=observe if coverage is not None else None)  # fmt: skip
        if coverage is not None:
            coverage.fired.update(fired)
        results.append(CaseResult(case, verdict.decision, verdict.reasons, verdict.why))
    return results


def _tool(name: str, given: dict[str, Any]) -> Tool:
    hints = ToolAnnotations(read_only_hint=given["read_only"], destructive_hint=given["destructive"],
                            open_world_hint=given["open_world"])  # fmt: skip
    return Tool(name=name, input_schema={"type": "object"}, annotations=hints)
