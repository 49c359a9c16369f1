"""``groundstate logic check`` and ``groundstate logic run``, run as a user would, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "reachability.mg"


def groundstate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groundstate", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_run_prints_sorted_canonical_facts(tmp_path: Path) -> None:
    program = tmp_path / "p.mg"
    program.write_text(
        "edge(/b, /c). edge(/a, /b).\npath(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
        'label(/a, "x\\ty").\n'
    )
    result = groundstate("logic", "run", str(program))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "edge(/a, /b)",
        "edge(/b, /c)",
        'label(/a, "x\\ty")',
        "path(/a, /b)",
        "path(/a, /c)",
        "path(/b, /c)",
    ]


def test_run_queries_json_and_stats() -> None:
    result = groundstate(
        "logic",
        "run",
        str(EXAMPLE),
        "-q",
        "violation(X, Y)",
        "-q",
        "fan_out(/service/web, N)",
        "--format",
        "json",
        "--stats",
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows == [
        {"predicate": "violation", "args": [{"name": "/service/web"}, {"name": "/service/db"}]},
        {"predicate": "fan_out", "args": [{"name": "/service/web"}, 3]},
    ]
    assert "iterations:" in result.stderr and "reaches: 6" in result.stderr


def test_run_several_files(tmp_path: Path) -> None:
    (tmp_path / "a.mg").write_text("Decl e(X).\ne(1).\n")
    (tmp_path / "b.mg").write_text("f(X) :- e(X).\n")
    result = groundstate("logic", "run", str(tmp_path / "a.mg"), str(tmp_path / "b.mg"), "-q", "f(X)")
    assert result.stdout == "f(1)\n"


def test_check_reports_diagnostics_with_caret(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mg"
    bad.write_text("q(1).\np(X) :- q(X), !r(Y).\nr(2).\n")
    result = groundstate("logic", "check", str(bad))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{bad}:2:18: error: variable Y in !r(Y) is not bound by a positive subgoal (use _ for 'any value')",
        "  p(X) :- q(X), !r(Y).",
        "                   ^",
    ]
    assert result.stdout == ""


def test_check_ok_and_run_errors(tmp_path: Path) -> None:
    assert groundstate("logic", "check", str(EXAMPLE)).returncode == 0
    bad = tmp_path / "runtime.mg"
    bad.write_text("q(0).\np(X) :- q(Y), X = fn:div(1, Y).\n")
    result = groundstate("logic", "run", str(bad))
    assert result.returncode == 1
    assert result.stderr.startswith(f"{bad}:2:1: error: fn:div: division by zero")
    syntax = tmp_path / "syntax.mg"
    syntax.write_text("p(1")
    result = groundstate("logic", "run", str(syntax))
    assert result.returncode == 1 and f"{syntax}:1:4: error:" in result.stderr


def test_created_fact_limit_option(tmp_path: Path) -> None:
    program = tmp_path / "inf.mg"
    program.write_text("n(0).\nn(Y) :- n(X), Y = fn:plus(X, 1).\n")
    result = groundstate("logic", "run", str(program), "--created-fact-limit", "100")
    assert result.returncode == 1 and "created-fact limit of 100 reached" in result.stderr


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    assert groundstate("logic", "run", str(tmp_path / "missing.mg")).returncode == 2
    assert groundstate("logic", "run", str(EXAMPLE), "--format", "xml").returncode == 2
    assert groundstate("logic", "frobnicate").returncode == 2


def test_invalid_utf8_is_a_positioned_error(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.mg"
    bad.write_bytes(b'p(1).\nq("caf\xe9").\n')
    result = groundstate("logic", "check", str(bad))
    assert result.returncode == 1
    assert result.stderr.startswith(f"{bad}:2:7: error: invalid UTF-8 (byte 0xe9)")
