"""The rules the MCP guard and the runtime share live in one module each, loaded by both: the write holds in
``writes.mg``, the flows of values in ``flows.mg``. A second copy of a shared rule in a host's own file (how the
runtime once said "is not marked read-only" where the guard said "changes things") fails here."""

from __future__ import annotations

from pathlib import Path

from groundstate.guard import McpPolicy
from groundstate.provenance import shared_rules
from groundstate.runtime import guard_rule_parts

SOURCE = Path(__file__).resolve().parents[2] / "src" / "groundstate"
SHARED_REASONS = ("changes things (it is not read-only)", "may destroy data (the server marks it destructive)")


def test_each_shared_reason_is_written_once_in_the_shipped_rules() -> None:
    for reason in SHARED_REASONS:
        holders = sorted(path.name for path in SOURCE.rglob("*.mg") if reason in path.read_text(encoding="utf-8"))
        assert holders == ["writes.mg"], (reason, holders)


def test_both_hosts_load_the_shared_modules() -> None:
    names = [path.name for path in shared_rules()]
    assert names == ["flows.mg", "writes.mg"]
    runtime = [origin for origin, _, _ in guard_rule_parts([])]
    assert runtime == ["guards.mg", *names]
    assert [path.name for path in McpPolicy([]).kernel.sources] == ["mcp.mg", *names]
