"""A run's pinned policy is loaded from a file stored by its content, so the runs a process drives under one policy
share one parse and analysis of it (and its compiled plans), and a run under another policy never gets this one."""

from __future__ import annotations

from pathlib import Path

from groundstate.runtime import GuardKernel, PinnedPolicy, guard_rules, parse_workflow
from groundstate.runtime.guards import pinned_file

FLOW = parse_workflow("""
name: pinned
agents:
  - id: writer_a
    instructions: Write it.
""")
EXTRA = 'needs_approval(R, A, /quality, "extra") :- tool_call(R, A, _, /web_search, _).\n'


def policy(extra: str = "") -> PinnedPolicy:
    return PinnedPolicy.of(guard_rules([]) + extra, [])


def test_runs_under_one_policy_share_its_file_and_its_parse(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    first = GuardKernel("run-1", FLOW, tmp_path / "ws", policy(), tmp_path / "pinned")
    second = GuardKernel("run-2", FLOW, tmp_path / "ws", policy(), tmp_path / "pinned")
    other = GuardKernel("run-3", FLOW, tmp_path / "ws", policy(EXTRA), tmp_path / "pinned")
    assert first.kernel.program is second.kernel.program  # parsed and analysed once
    assert other.kernel.program is not first.kernel.program
    assert first.kernel.sources[-2:] == second.kernel.sources[-2:] != other.kernel.sources[-2:]
    files = sorted(p.relative_to(tmp_path / "pinned").parts[1] for p in (tmp_path / "pinned").rglob("*.mg"))
    assert files == ["cortex.mg", "guards.mg", "guards.mg"]  # two policies with the same patterns: three files


def test_a_pinned_file_holds_exactly_its_text_and_is_never_rewritten(tmp_path: Path) -> None:
    path = pinned_file(tmp_path, "guards.mg", "a(1).\n")
    assert path.read_text(encoding="utf-8") == "a(1).\n" and path.name == "guards.mg"
    stamp = path.stat().st_mtime_ns
    assert pinned_file(tmp_path, "guards.mg", "a(1).\n") == path and path.stat().st_mtime_ns == stamp
    assert pinned_file(tmp_path, "guards.mg", "a(2).\n") != path
    assert not list(tmp_path.rglob(".*.tmp"))  # no half-written file left behind
