"""Golden programs: every construct of the dialect, and every class of error, against hand-written output."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundstate.logic import Engine, LogicError, Program, display_fact

GOLDEN = Path(__file__).parent / "golden"
PROGRAMS = sorted(GOLDEN.glob("*.mg"))
ERRORS = sorted((GOLDEN / "errors").glob("*.mg"))


def evaluate_lines(path: Path) -> list[str]:
    engine = Engine(Program.load(path))
    engine.evaluate()
    return [display_fact(pred, fact) for pred, facts in engine.all_facts().items() for fact in facts]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_golden_program(path: Path) -> None:
    expected = path.with_suffix(".expected").read_text(encoding="utf-8").splitlines()
    assert evaluate_lines(path) == expected


@pytest.mark.parametrize("path", ERRORS, ids=lambda p: p.stem)
def test_golden_error(path: Path) -> None:
    expected = path.with_suffix(".expected").read_text(encoding="utf-8").strip().replace("<SRC>", str(path))
    with pytest.raises(LogicError) as info:
        evaluate_lines(path)
    formatted = info.value.diagnostics[0].format().splitlines()
    assert formatted[0] == expected
    line, column = (int(n) for n in expected.split(": error")[0].rsplit(":", 2)[1:])
    source_lines = path.read_text(encoding="utf-8").split("\n")
    if line <= len(source_lines) and source_lines[line - 1]:
        assert formatted[1] == "  " + source_lines[line - 1]
        assert formatted[2] == "  " + " " * (column - 1) + "^"


def test_every_golden_program_has_expected_output() -> None:
    assert len(PROGRAMS) >= 8 and len(ERRORS) >= 20
    for path in PROGRAMS + ERRORS:
        assert path.with_suffix(".expected").exists(), path
