"""The ground-fact fast path of the parser: a line that is exactly one fact of plain constants — ``pred(1, "a",
/b).`` — becomes its clause straight from one regular expression, without the tokenizer; every other line goes
through the full parser, with the fact lines blanked so that its line and column numbers (and so every
diagnostic) stay exactly what they would have been.

A fact line is taken only where that cannot change the meaning: not when the text has a backtick string (the one
kind that spans lines, so a "fact line" could be part of its content) or a ``Package``/``Use`` line (which must
precede every clause); and an integer outside 64 bits, a float, an escape or anything unusual leaves the line to the
full parser, which reports it as it always does. If the rest does not parse on its own — a fact line was in fact
the continuation of a rule — the whole text is parsed the slow way, so the error is the full parser's own.
"""

from __future__ import annotations

import re
from typing import Any

from .ast import Atom, Clause, Const, SourceUnit
from .errors import ParseError, Position
from .gcpause import gc_paused
from .lexer import KEYWORDS
from .values import INT64_MAX, INT64_MIN, Name

_ARG = r"""(?:-?[0-9]+(?![0-9.eE])|"[^"\\\n]*"|/[A-Za-z0-9._~%-]+(?:/[A-Za-z0-9._~%-]+)*)"""
_FACT = re.compile(rf"""([a-z][A-Za-z0-9_]*)\([ \t]*({_ARG}(?:[ \t]*,[ \t]*{_ARG})*)[ \t]*\)\.[ \t\r]*""")
_ONE_ARG = re.compile(_ARG)
_UNSAFE = re.compile(r"`|^[ \t]*(?:Package|Use)\b", re.MULTILINE)
MIN_FACTS = 64  # below this, the full parser alone is as fast


def split_ground_facts(text: str, source: str) -> tuple[str, list[tuple[int, Clause]]] | None:
    """``(the text with its fact lines blanked, [(line number, clause)])``, or None when the fast path does not apply
    (unsafe text, or too few fact lines to be worth it)."""
    if _UNSAFE.search(text):
        return None
    lines = text.split("\n")
    facts: list[tuple[int, Clause]] = []
    fullmatch = _FACT.fullmatch
    with gc_paused():  # a hundred thousand small objects: collections in between would only slow it down
        _scan(lines, facts, fullmatch, source)
    if len(facts) < MIN_FACTS:
        return None
    return "\n".join(lines), facts


def _scan(lines: list[str], facts: list[tuple[int, Clause]], fullmatch: Any, source: str) -> None:
    for index, line in enumerate(lines):
        if not line or line[0] < "a" or line[0] > "z":
            continue
        m = fullmatch(line)
        if m is None:
            continue
        clause = _clause(m, line, index + 1, source)
        if clause is not None:
            facts.append((index + 1, clause))
            lines[index] = ""


def _clause(m: re.Match[str], line: str, number: int, source: str) -> Clause | None:
    if m.group(1) in KEYWORDS:  # `bound(1).` is a keyword where a clause should start: the full parser says so
        return None
    new = tuple.__new__
    head = new(Position, (source, number, 1, line))
    args = []
    for start, raw in _arguments(line, m.start(2), m.end(2)):
        first = raw[0]
        if first == '"':
            value: object = raw[1:-1]
        elif first == "/":
            value = Name(raw)
        else:
            value = int(raw)
            if not INT64_MIN <= value <= INT64_MAX:
                return None  # the full parser reports it
        args.append(Const(value, new(Position, (source, number, start + 1, line))))
    atom = Atom(m.group(1), tuple(args), head)
    return Clause(atom, (), None, head)


def _arguments(line: str, start: int, end: int) -> list[tuple[int, str]]:
    """Each argument's offset in the line and its text (commas split them unless a string could hold one)."""
    text = line[start:end]
    if '"' in text:
        return [(arg.start(), arg.group()) for arg in _ONE_ARG.finditer(line, start, end)]
    found, offset = [], start
    for piece in text.split(","):
        stripped = piece.lstrip(" \t")
        found.append((offset + len(piece) - len(stripped), stripped.rstrip(" \t")))
        offset += len(piece) + 1
    return found


def boundaries_hold(unit: SourceUnit, rest: str, fact_lines: list[int]) -> bool:
    """Whether every run of fact lines stood between two statements of the rest: the first content after each run
    is where a statement of the rest starts (else a fact line was the continuation of a statement, e.g. the last
    line of a rule, and the text must be parsed whole)."""
    starts = {(c.pos.line, c.pos.column) for c in unit.clauses} | {(d.pos.line, d.pos.column) for d in unit.decls}
    lines, taken = rest.split("\n"), set(fact_lines)
    for number in fact_lines:
        if number + 1 in taken:
            continue  # the run goes on
        for index in range(number, len(lines)):  # lines[index] is line index + 1
            text = lines[index]
            content = text.lstrip(" \t\r\f\v\ufeff")
            if not content or content.startswith("#"):
                continue
            if (index + 1, len(text) - len(content) + 1) not in starts:
                return False
            break
    return True


def merged(unit: SourceUnit, facts: list[tuple[int, Clause]]) -> SourceUnit:
    """The unit's clauses and the fast path's facts in the order of their lines."""
    if not unit.clauses:
        unit.clauses = [clause for _, clause in facts]
        return unit
    rest = [(clause.pos.line, clause) for clause in unit.clauses]
    everything = sorted([*rest, *facts], key=lambda pair: pair[0])  # stable: same-line clauses keep their order
    unit.clauses = [clause for _, clause in everything]
    return unit


__all__ = ["ParseError", "boundaries_hold", "merged", "split_ground_facts"]
