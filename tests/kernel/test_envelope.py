"""One end-to-end test per action type: control packet → pending_action → permission → routing → result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from groundstate.kernel import ActionReport

from .conftest import Turns

CASES: list[tuple[str, str, Any, str]] = [
    # action, target, payload, a string the output must contain
    ("/read_file", "app.py", "", "return 42"),
    ("/fs_read", "app.py", "", "return 42"),  # an alias, routed as read_file
    ("/write_file", "new/notes.txt", {"content": "hello"}, "wrote 5 bytes"),
    ("/fs_write", "alias.txt", "plain text", "wrote 10 bytes"),
    ("/edit_file", "app.py", {"old": "42", "new": "43"}, "edited app.py"),
    ("/list_files", "", "", "test_app.py"),
    ("/search_code", r"def \w+", "", "app.py:1: def answer():"),
    ("/search_files", "test_*.py", "", "test_app.py"),
    ("/git_status", "", "", "## "),
    ("/git_diff", "", "", ""),
    ("/show_diff", "app.py", "", ""),
    ("/git_log", "", {"count": 1}, "initial"),
    ("/run_tests", "", "", "1 passed"),
    ("/build_project", "", "", ""),
    ("/execute_python", "", {"code": "print(6 * 7)"}, "42"),
    ("/ask_user", "app.py", "Which function?", "Which function?"),
    ("/web_search", "home battery market size", "", "Home battery storage: sample market notes (home-batteries.md)"),
    ("/delegate_coder", "app.py", "make answer() configurable", "delegated to the coder"),
    ("/delegate_reviewer", "app.py", "review it", "delegated to the reviewer"),
    ("/delegate_researcher", "codebase", "find prior art", "delegated to the researcher"),
]


def envelope_facts(turns: Turns, report: ActionReport) -> None:
    """Every stage left a fact keyed by the same ActionID."""
    k, action = turns.kernel, report.action_id
    assert k.query(f"pending_action({action}, T, G, P, M)")
    assert k.query(f"permission_check_result({action}, /permit, R, M)")
    assert k.query(f"routing_result({action}, /success, E, M)")
    assert k.query(f"execution_result({action}, T, /success, O, M)")
    assert k.phase() == "/observe"


@pytest.mark.parametrize(("action", "target", "payload", "expected"), CASES, ids=[c[0] for c in CASES])
def test_action_through_the_whole_envelope(turns: Turns, action: str, target: str, payload: Any, expected: str) -> None:
    report = turns.request(action, target, payload)
    assert report.decision == "/permit" and report.status == "/success", report
    assert expected in (report.output or "")
    envelope_facts(turns, report)


def test_side_effects_are_real(turns: Turns) -> None:
    turns.request("/write_file", "new/notes.txt", {"content": "hello"})
    assert (turns.root / "new" / "notes.txt").read_text() == "hello"
    turns.request("/edit_file", "app.py", {"old": "return 42", "new": "return 43"})
    assert "return 43" in (turns.root / "app.py").read_text()
    diff = turns.request("/git_diff", "", "")
    assert "-    return 42" in (diff.output or "") and "+    return 43" in (diff.output or "")
    report = turns.request("/delegate_coder", "app.py", "task")
    assert turns.kernel.query(f"delegation({report.action_id}, /coder, T)")


def test_dangerous_actions_wait_for_approval(turns: Turns) -> None:
    report = turns.request("/delete_file", "app.py")
    assert (report.decision, report.reason) == ("/deny", "requires user approval: deleting a file")
    assert (turns.root / "app.py").exists() and report.status is None
    assert turns.kernel.query(f"awaiting_approval({report.action_id}, R)")
    turns.shards.approve(report.action_id)
    assert turns.kernel.phase() == "/act"  # permitted now, not yet routed
    turns.shards.act()
    after = turns.shards.report(report.action_id)
    assert (after.decision, after.status) == ("/permit", "/success") and not (turns.root / "app.py").exists()
    with pytest.raises(ValueError, match="not awaiting approval"):
        turns.shards.approve(report.action_id)


def test_commit_needs_approval_then_commits(turns: Turns) -> None:
    (turns.root / "more.txt").write_text("x")
    report = turns.request("/git_commit", "", {"message": "add more"})
    assert report.decision == "/deny"
    turns.shards.approve(report.action_id)
    turns.shards.act()
    assert turns.shards.report(report.action_id).status == "/success"
    assert "add more" in (turns.request("/git_log", "", {"count": 1}).output or "")


def test_unknown_and_escaping_actions_are_denied(turns: Turns) -> None:
    assert turns.request("/format_disk", "", "").reason == "unknown action type"
    assert turns.request("/read_file", "../../etc/passwd").reason == "the target is not a valid workspace path"
    assert turns.request("/write_file", "/etc/x", "y").reason == "the target is not a valid workspace path"
    (turns.root / "out").symlink_to("/etc")
    assert turns.request("/read_file", "out/passwd").reason == "the target is outside the workspace"


def test_intents_drive_actions_and_the_phase_is_always_true(turns: Turns) -> None:
    k, shards = turns.kernel, turns.shards
    assert k.phase() == "/observe"
    from groundstate.packets import parse_output

    packet = ('{"control_packet": {"intent_classification": {"category": "/query", "verb": "/explain", '
              '"target": "app.py", "confidence": 0.95}}, "surface_response": ""}')  # fmt: skip
    shards.perceive(parse_output(packet, k.update_validator()))
    assert k.phase() == "/decide" and k.query("pending_intent(/current_intent)")
    [action_id] = shards.decide()
    assert k.phase() == "/act" and not k.query("pending_intent(I)")
    shards.act()
    assert k.phase() == "/observe"
    assert shards.report(action_id).output == "def answer():\n    return 42\n"


def test_uncertain_or_missing_targets_ask_the_user(turns: Turns) -> None:
    [report] = turns.turn("/explain", "app.py", confidence=0.3)
    assert report.type == "/ask_user" and turns.kernel.query(f"user_question({report.action_id}, Q)")
    [report] = turns.turn("/fix", "nowhere.py", category="/mutation")
    assert report.type == "/ask_user"
    assert turns.kernel.query('ambiguity_flag(/current_intent, /missing_target, "nowhere.py")')


def test_each_turn_replaces_the_current_intent(turns: Turns) -> None:
    turns.turn("/explain", "app.py")
    turns.turn("/list", "codebase")
    intents = turns.kernel.query("user_intent(I, C, V, T, X)")
    assert [str(row[2]) for row in intents] == ["/list"]
    assert len(turns.kernel.query("current_time(T)")) == 1
    assert len(turns.kernel.query("pending_action(A, T, G, P, M)")) == 2  # the action log keeps both


def test_chesterton_fence_warns_on_recent_changes(turns: Turns) -> None:
    report = turns.request("/edit_file", "app.py", {"old": "42", "new": "41"})
    assert report.warnings and report.warnings[0].startswith("app.py was modified")


def test_model_asking_for_approval_is_honoured(turns: Turns, tmp_path: Path) -> None:
    tool = {"tool": "/write_file", "argument": "a.txt", "content": "x"}
    [report] = turns.turn("/do", category="/instruction", tool_requests=[tool],
                          safety_gates={"requires_user_approval": True})  # fmt: skip
    assert report.reason == "requires user approval: the model asked for approval"
