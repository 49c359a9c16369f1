"""Which facts live for one attempt of an agent is declared in guards.mg (``attempt()`` in a Decl), and the runtime
reads it from there: the next attempt begins without them, and a fact of an attempt that the rules do not declare so
is refused instead of outliving its attempt."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundstate.kernel import PolicyInvariantError
from groundstate.logic import Program
from groundstate.runtime import GuardKernel, PinnedPolicy, guard_rules, parse_workflow
from groundstate.runtime.guards import PINNED_BEFORE_LIFETIMES, attempt_facts

FLOW = parse_workflow("""
name: lifetimes
agents:
  - id: coder_a
    instructions: Compute it.
    tools: [execute_python]
""")

# what the runtime reports about one attempt (runtime/guards.py), written out here so that the shipped rules must
# declare each of them: a Decl that loses its attempt() fails this test
PER_ATTEMPT = {
    "agent_model", "agent_output", "agent_output_digest", "agent_usage", "approved_reason", "bypass", "current_call",
    "error_kind", "finish_reason", "finished", "hard_error", "memory_write", "model_fallback", "model_refused",
    "native_tool_call", "preflight", "status_tag", "tool_call", "tool_content", "tool_content_digest",
    "tool_executed", "tool_in_doubt", "upstream_files", "upstream_output", "upstream_truncated",
}  # fmt: skip


def kernel(tmp_path: Path, rules: str) -> GuardKernel:
    (tmp_path / "ws").mkdir(exist_ok=True)
    return GuardKernel("run-1", FLOW, tmp_path / "ws", PinnedPolicy.of(rules, []), tmp_path / "state")


def test_the_shipped_rules_declare_every_fact_of_an_attempt() -> None:
    analyzed = Program.parse(guard_rules([]), source="guards.mg").analyze(True)
    assert set(attempt_facts(analyzed)) == PER_ATTEMPT


def test_rules_pinned_before_lifetimes_were_declared_keep_the_list_they_ran_with() -> None:
    old = guard_rules([]).replace(", attempt()]", "]")
    assert set(attempt_facts(Program.parse(old, source="guards.mg").analyze(True))) == set(PINNED_BEFORE_LIFETIMES)
    assert set(PINNED_BEFORE_LIFETIMES) == PER_ATTEMPT


def test_the_next_attempt_begins_without_the_facts_of_the_last(tmp_path: Path) -> None:
    guards = kernel(tmp_path, guard_rules([]))
    guards.preflight("coder_a", {}, 0)
    guards.tool_call("coder_a", 7, "execute_python", "print(1)")
    guards.finished("coder_a", "success", None, ["execute_python"], None)
    assert guards.kernel.match("status_tag", "run-1", "coder_a")
    guards.preflight("coder_a", {}, 0)  # the retry
    assert guards.kernel.match("preflight", "run-1", "coder_a")
    for predicate in PER_ATTEMPT - {"preflight", "upstream_files"}:
        assert not guards.kernel.match(predicate, "run-1", "coder_a"), predicate


def test_a_fact_of_an_attempt_the_rules_do_not_declare_so_is_refused(tmp_path: Path) -> None:
    """Rules that declare lifetimes but leave one out: reporting that fact fails loudly, naming it and the fix."""
    rules = guard_rules([])
    at = rules.index("Decl status_tag(")
    undeclared = rules[:at] + rules[at:].replace(", attempt()]", "]", 1)
    guards = kernel(tmp_path, undeclared)
    guards.preflight("coder_a", {}, 0)
    with pytest.raises(PolicyInvariantError, match=r"status_tag .*add attempt\(\) to the descr of Decl status_tag"):
        guards.finished("coder_a", "success", None, [], None)
