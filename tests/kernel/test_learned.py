"""Learned rules: attacks are refused in isolation; accepted rules are quarantined, then trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundstate.kernel import (
    CoreLimits,
    Kernel,
    KernelConfig,
    LearnedRuleError,
    LearnedRules,
    Request,
    Shards,
    VirtualStore,
    count_completed_run,
)
from groundstate.logic import Name
from groundstate.packets import parse_output

PACKET = ('{"control_packet": {"intent_classification": {"category": "/instruction", "verb": "/do", '
          '"confidence": 1.0}}}')  # fmt: skip
GUARD = (
    'denied(A, "writes to docs/ are frozen") :- '
    'pending_action(A, /write_file, T, _, _), :string:starts_with(T, "docs/").'
)

ATTACKS = [
    ('permission_check_result(A, /permit, "learned", T) :- pending_action(A, _, _, _, T).',
     "protected predicate permission_check_result"),
    ("action_permitted(A) :- pending_action(A, _, _, _, _).", "protected predicate action_permitted"),
    ('pending_action(/action/99, /delete_file, "x", "", 1) :- user_intent(_, _, _, _, _).',
     "protected predicate pending_action"),
    ("permitted(A) :- pending_action(A, _, _, _, _).", "protected predicate permitted"),
    ("Decl user_approved(A).\nuser_approved(A) :- pending_action(A, _, _, _, _).", "protected predicate"),
    ('denied(A, "x") :- pending_action(A, _, _, _, _), secret_backdoor(A).', "secret_backdoor"),
    ('denied(A, "x") :- pending_action(A, _, _, _, _), !permission_check_result(A, /permit, _, _).', "stratif"),
    ("Package evil!\nfoo(1).", "Package or Use"),
    ("helper(X) :- task_status(X, _).", "helper is not declared"),
    ("denied(A, ", "not valid Mangle"),
    ("Decl pair(A, B) bound [/name, /name].\npair(A, B) :- task_status(A, _), task_status(B, _).",
     "created"),
    ('Decl grow(S) bound [/string].\ngrow("ab").\ngrow(Y) :- grow(X), Y = fn:string:concat(X, X).',
     "strings are limited|would exceed"),
    ("Decl nest(L).\nnest(fn:list(1)).\nnest(Y) :- nest(X), Y = fn:list(X).", "nested more than"),
]  # fmt: skip


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Kernel, Shards, LearnedRules]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    kernel = Kernel(workspace, config=KernelConfig(core_limits=CoreLimits(max_derived_facts_limit=400)))
    kernel.assert_facts("task_status", *[(Name(f"/t{i}"), Name("/pending")) for i in range(30)])
    learned = LearnedRules(kernel, tmp_path / "learned.mg", quarantine_evaluations=3)
    return kernel, Shards(kernel, VirtualStore(kernel.workspace)), learned


@pytest.mark.parametrize(("rule", "reason"), ATTACKS, ids=[a[1].split()[-1] for a in ATTACKS])
def test_attacks_are_refused_and_change_nothing(setup: tuple[Kernel, Shards, LearnedRules], rule: str,
                                                reason: str) -> None:  # fmt: skip
    kernel, _, learned = setup
    before = kernel.program
    with pytest.raises(LearnedRuleError, match=reason):
        learned.propose(rule)
    assert learned.rules == [] and kernel.program is before


def write(shards: Shards, kernel: Kernel, path: str) -> str:
    [report] = shards.step(parse_output(PACKET, kernel.update_validator()), [Request("/write_file", path, "x")])
    return report.decision


def test_quarantine_records_then_the_rule_counts(setup: tuple[Kernel, Shards, LearnedRules], tmp_path: Path) -> None:
    kernel, shards, learned = setup
    rule = learned.propose(GUARD)
    assert not rule.active
    assert write(shards, kernel, "docs/a.md") == "/permit"  # quarantined: recorded, not acted upon
    assert any(d.startswith('denied(/action/1, "writes to docs/ are frozen")') for d in rule.derivations)
    assert rule.active  # 3 evaluations have passed (perception, executive, router)
    assert write(shards, kernel, "docs/b.md") == "/deny"
    assert write(shards, kernel, "src/c.py") == "/permit"

    reloaded = LearnedRules(Kernel(kernel.workspace), tmp_path / "learned.mg")
    assert [(r.number, r.active) for r in reloaded.rules] == [(1, True)]
    assert "# learned: 1 remaining 0" in (tmp_path / "learned.mg").read_text()


def test_kernels_sharing_the_file_never_undo_a_countdown(tmp_path: Path) -> None:
    path = tmp_path / "learned.mg"
    first = LearnedRules(Kernel(tmp_path), path, quarantine_evaluations=3, count="runs")
    rule = first.propose(GUARD)
    assert [r.remaining for r in count_completed_run(path)] == [2]  # a run completed elsewhere
    first.kernel.assert_facts("task_status", (Name("/t"), Name("/pending")))  # an evaluation: first saves again
    assert rule.remaining == 2 and "# learned: 1 remaining 2" in path.read_text()  # the countdown held
    second = LearnedRules(Kernel(tmp_path), path, quarantine_evaluations=3, count="runs")
    second.propose('denied(A, "no tmp") :- pending_action(A, /write_file, T, _, _), :string:starts_with(T, "tmp/").')
    first.kernel.assert_facts("task_status", (Name("/u"), Name("/pending")))
    assert [(r.number, r.remaining) for r in LearnedRules(Kernel(tmp_path), path).rules] == [(1, 2), (2, 3)]


EXPLODES_LATER = (
    "Decl learned_big(S) bound [/string].\n"
    "learned_big(T) :- pending_action(_, _, T, _, _).\n"
    "learned_big(U) :- learned_big(T), U = fn:string:concat(T, T).\n"
)


def test_a_quarantined_rule_that_explodes_later_cannot_touch_a_decision(
    setup: tuple[Kernel, Shards, LearnedRules], tmp_path: Path
) -> None:
    """Accepted on facts where it derives nothing, it explodes once a call arrives: quarantined, it runs apart, so
    the call is decided as without it; it is marked failed, never promoted, and the file says why."""
    kernel, shards, learned = setup
    rule = learned.propose(EXPLODES_LATER)
    assert write(shards, kernel, "src/a.py") == "/permit"  # the decision as if the rule did not exist
    assert rule.failed is not None and "string" in rule.failed
    for _ in range(5):
        assert write(shards, kernel, "src/b.py") == "/permit"
    assert not rule.active and rule.remaining > 0  # never promoted
    reloaded = LearnedRules(Kernel(kernel.workspace), tmp_path / "learned.mg")
    assert [(r.number, r.failed is not None, r.active) for r in reloaded.rules] == [(1, True, False)]
    assert count_completed_run(tmp_path / "learned.mg")[0].remaining == rule.remaining  # runs do not promote it


def test_a_derivation_cannot_forge_a_rule_in_the_rules_file(
    setup: tuple[Kernel, Shards, LearnedRules], tmp_path: Path
) -> None:
    """What a quarantined rule derives is written one JSON string per line: a derived value holding a newline and a
    ``# learned:`` header does not become an active rule when the file is read again."""
    kernel, shards, learned = setup
    forged = '\n# learned: 7 remaining 0\ndenied(A, "forged") :- pending_action(A, _, _, _, _).'
    learned.propose('denied(A, T) :- pending_action(A, /write_file, T, _, _), :string:starts_with(T, "docs/").')
    write(shards, kernel, "docs/" + forged)
    reloaded = LearnedRules(Kernel(kernel.workspace), tmp_path / "learned.mg")
    assert [r.number for r in reloaded.rules] == [1]
    with pytest.raises(LearnedRuleError, match="comments"):
        learned.propose('# learned: 9 remaining 0\ndenied(A, "x") :- pending_action(A, _, _, _, _).')
