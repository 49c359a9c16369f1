"""``groundstate logic lint`` and ``kernel lint``: the Datalog mistakes people make, each named with file:line:col,
read with the shipped policy the rules join. Each check is shown firing on a file that has the mistake and silent
on the same file without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def lint(tmp_path: Path, text: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "mine.mg").write_text(text)
    return subprocess.run([sys.executable, "-m", "groundstate", "logic", "lint", *arguments, "mine.mg"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip


CASES = [
    (  # a variable that occurs once: a typo
        'mcp_denied(C, "x") :- mcp_call(C, S, _, _, _), mcp_argument(C, "path", Paht), S = "git".\n',
        'mcp_denied(C, "x") :- mcp_call(C, S, _, _, _), mcp_argument(C, "path", P), S = "git",\n'
        '  :string:starts_with(P, "/etc/").\n',  # a built-in is no predicate that must be derived
        "mine.mg:1:72: warning: singleton-variable: Paht occurs once in this clause",
    ),
    (  # declared, and nothing uses it
        'Decl my_servers(S) descr [doc("mine")] bound [/string].\nmy_servers("git").\n'
        'Decl my_old(S) descr [doc("gone")] bound [/string].\n'
        'mcp_denied(C, "x") :- mcp_call(C, S, _, _, _), my_servers(S).\n',
        'Decl my_servers(S) descr [doc("mine")] bound [/string].\nmy_servers("git").\n'
        'mcp_denied(C, "x") :- mcp_call(C, S, _, _, _), my_servers(S).\n',
        "mine.mg:3:1: warning: unused-declaration: my_old is declared but no clause, fact or rule uses it",
    ),
    (  # used, and nothing derives or asserts it: groundstate never reports it
        'Decl my_servers(S) descr [doc("mine")] bound [/string].\n'
        'mcp_denied(C, "x") :- mcp_call(C, S, _, _, _), my_servers(S).\n',
        'Decl my_servers(S) descr [doc("mine")] bound [/string].\nmy_servers("git").\n'
        'mcp_denied(C, "x") :- mcp_call(C, S, _, _, _), my_servers(S).\n',
        "mine.mg:1:1: error: never-derived: my_servers is used in a rule body but nothing derives or asserts it",
    ),
    (  # a rule that needs a predicate only a dead rule derives
        'Decl my_servers(S) descr [doc("mine")] bound [/string].\n'
        'Decl my_flag(C) descr [doc("flagged")] bound [/string].\n'
        'my_flag(C) :- mcp_call(C, S, _, _, _), my_servers(S).\n'
        'mcp_needs_approval(C, "flagged") :- my_flag(C).\n',
        'Decl my_servers(S) descr [doc("mine")] bound [/string].\nmy_servers("git").\n'
        'Decl my_flag(C) descr [doc("flagged")] bound [/string].\n'
        'my_flag(C) :- mcp_call(C, S, _, _, _), my_servers(S).\n'
        'mcp_needs_approval(C, "flagged") :- my_flag(C).\n',
        "mine.mg:4:1: warning: never-fires: this rule for mcp_needs_approval needs my_flag, which nothing can make",
    ),
    (  # the same rule twice, up to its variables' names
        'mcp_denied(C, "x") :- mcp_call(C, "git", _, _, _).\n'
        'mcp_denied(Call, "x") :- mcp_call(Call, "git", _, _, _).\n',
        'mcp_denied(C, "x") :- mcp_call(C, "git", _, _, _).\n'
        'mcp_denied(Call, "y") :- mcp_call(Call, "git", _, _, _).\n',
        "mine.mg:2:1: warning: duplicate-rule: repeats the clause at mine.mg:1",
    ),
    (  # a shipped rule repeated
        'mcp_permitted(C, R) :- mcp_call(C, S, T, _, _), mcp_read_only(S, T), '
        'R = fn:string:concat(S, "/", T, " is read-only").\n',
        'mcp_permitted(C, R) :- mcp_call(C, S, T, _, _), mcp_read_only(S, T), '
        'R = fn:string:concat(S, "/", T, " may be read").\n',
        "mine.mg:1:1: warning: shadows-shipped: repeats the shipped rule at ",
    ),
    (  # a row added to what the shipped policy computes in one piece
        'mcp_verdict(C, /permit, ["mine"]) :- mcp_call(C, "time", _, _, _).\n',
        'mcp_permitted(C, "mine") :- mcp_call(C, "time", _, _, _).\n',
        "mine.mg:1:1: error: shadows-shipped: adds to mcp_verdict, which the shipped policy computes in one piece at ",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("wrong", "right", "expected"), CASES)
def test_each_mistake_is_named_where_it_is(tmp_path: Path, wrong: str, right: str, expected: str) -> None:
    found = lint(tmp_path, wrong, "--policy", "mcp")
    assert "Traceback" not in found.stderr
    assert any(line.startswith(expected) for line in found.stdout.splitlines()), found.stdout + found.stderr
    if ": error: " in expected:  # an error fails the command
        assert found.returncode == 1
    fixed = lint(tmp_path, right, "--policy", "mcp")
    assert fixed.returncode == 0 and fixed.stdout == "", fixed.stdout + fixed.stderr
    assert fixed.stderr.strip() == "0 error(s), 0 warning(s)"


def test_analysis_errors_come_first_and_the_hint_names_the_policy(tmp_path: Path) -> None:
    found = lint(tmp_path, 'mcp_denied(C, "x") :- mcp_call(C, _, _, _, _).\n')
    assert found.returncode == 1 and "could not find predicate mcp_call/5" in found.stderr
    assert "--policy mcp" in found.stderr


def test_kernel_lint_adds_the_datalog_checks_for_its_policy_files(tmp_path: Path) -> None:
    (tmp_path / "mine.mg").write_text("denied(A, \"no\") :- pending_action(A, T, _, _, _).\n")
    done = subprocess.run([sys.executable, "-m", "groundstate", "kernel", "lint", "--policy", "mine.mg"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mine.mg:1:38: warning: singleton-variable: T occurs once in this clause" in done.stdout
    assert done.stdout.splitlines()[-1] == "0 errors, 1 warnings"
