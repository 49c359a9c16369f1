"""The ground-fact fast path of the parser: a line that is exactly one fact of plain constants — ``pred(1, "a",
/b).`` — is read by one regular expression over the whole text, without the tokenizer, into a row (predicate,
values, the line's position) that the analysis loads as it is; every other line goes through the full parser, with
the fact lines blanked so that its line and column numbers (and so every diagnostic) stay exactly what they would
have been. ``parse_unit`` turns the rows back into clauses (``clause_of``: every argument's position rebuilt from
the line), so the syntax tree it returns is the full parser's.

A fact line is taken only where that cannot change the meaning: not when the text has a backtick string (the one
kind that spans lines, so a "fact line" could be part of its content) or a ``Package``/``Use`` line (which must
precede every clause); and an integer of 19 digits or more (which may not fit in 64 bits), a float, an escape or
anything unusual leaves the line to the full parser, which reports it as it always does. If the rest does not parse
on its own — a fact line was in fact the continuation of a rule — the whole text is parsed the slow way, so the
error is the full parser's own.
"""

from __future__ import annotations

import re
from typing import Any

from .ast import Atom, Clause, Const, FactRow, SourceUnit
from .errors import ParseError, Position
from .gcpause import gc_paused
from .lexer import KEYWORDS
from .values import Name

_ARG = r"""(?:-?[0-9]{1,18}(?![0-9.eE])|"[^"\\\n]*"|/[A-Za-z0-9._~%-]+(?:/[A-Za-z0-9._~%-]+)*)"""
_FACT = re.compile(rf"""([a-z][A-Za-z0-9_]*)\([ \t]*({_ARG}(?:[ \t]*,[ \t]*{_ARG})*)[ \t]*\)\.[ \t\r]*""")
_LINES = re.compile(rf"^(?:({_FACT.pattern})|(.*))$", re.MULTILINE)  # a fact line's parts, or another line
_ONE_ARG = re.compile(_ARG)
_PACKAGE_OR_USE = re.compile(r"^[ \t]*(?:Package|Use)\b", re.MULTILINE)
MIN_FACTS = 64  # below this, the full parser alone is as fast


def split_ground_facts(text: str, source: str) -> tuple[str, list[FactRow]] | None:
    """``(the text with its fact lines blanked, [row per fact line])``, or None when the fast path does not apply
    (unsafe text, or too few fact lines to be worth it)."""
    if "`" in text or (("Package" in text or "Use" in text) and _PACKAGE_OR_USE.search(text)):
        return None  # (the substring tests first: the expression alone costs a tenth of the whole scan)
    with gc_paused():  # a hundred thousand small tuples: collections in between would only slow it down
        rest, rows = _scan(text, source)
    if len(rows) < MIN_FACTS:
        return None
    return rest, rows


def _scan(text: str, source: str) -> tuple[str, list[FactRow]]:
    """Every fact line as a row, and the text without them (their newlines kept). One expression splits the text
    into lines and reads the fact lines' parts in the same pass (``findall``: no match object per line), so a
    line's number is its index."""
    rows: list[FactRow] = []
    kept: list[str] = []
    append, keep = rows.append, kept.append
    new, keywords = tuple.__new__, KEYWORDS
    number = 0
    for line, predicate, args, other in _LINES.findall(text):
        number += 1
        if not line:
            keep(other)
            continue
        if predicate in keywords:  # `bound(1).` is a keyword where a clause should start: the full parser says so
            keep(line)
            continue
        if '"' in args:
            values = _mixed(_ONE_ARG.findall(args))
        elif "/" in args:
            values = _mixed(args.split(","))
        else:
            values = tuple(map(int, args.split(",")))  # int() itself skips the blanks around each number
        keep("")
        append(new(FactRow, (predicate, values, new(Position, (source, number, 1, line)))))
    return "\n".join(kept), rows


def _mixed(raws: list[str]) -> tuple[Any, ...]:
    """The values of arguments that are not all integers."""
    values: list[Any] = []
    for raw in raws:
        raw = raw.strip(" \t")
        first = raw[0]
        values.append(raw[1:-1] if first == '"' else Name(raw) if first == "/" else int(raw))
    return tuple(values)


def clause_of(row: FactRow) -> Clause:
    """The clause the full parser makes of the row's line, every argument's position included."""
    source, number, _, line = row.pos
    opened = len(row.predicate) + 1  # the line is `pred(args) .` with blanks only around the arguments
    start = len(line) - len(line[opened:].lstrip(" \t"))
    end = len(line[: line.rindex(")")].rstrip(" \t"))
    new = tuple.__new__
    args = [
        Const(value, new(Position, (source, number, offset + 1, line)))
        for value, (offset, _) in zip(row.values, _arguments(line, start, end), strict=True)
    ]
    return Clause(Atom(row.predicate, tuple(args), row.pos), (), None, row.pos)


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


def with_clauses(unit: SourceUnit) -> SourceUnit:
    """The unit with its rows turned into clauses, all in the order of their lines (what the full parser returns)."""
    if not unit.ground:
        return unit
    with gc_paused():  # a hundred thousand syntax trees without cycles
        facts = [(row.pos.line, clause_of(row)) for row in unit.ground]
    unit.ground = []
    if not unit.clauses:
        unit.clauses = [clause for _, clause in facts]
        return unit
    rest = [(clause.pos.line, clause) for clause in unit.clauses]
    everything = sorted([*rest, *facts], key=lambda pair: pair[0])  # stable: same-line clauses keep their order
    unit.clauses = [clause for _, clause in everything]
    return unit


__all__ = ["ParseError", "boundaries_hold", "clause_of", "split_ground_facts", "with_clauses"]
