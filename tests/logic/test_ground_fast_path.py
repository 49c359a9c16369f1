"""The parser's ground-fact fast path (logic/ground.py) changes nothing but the time: for any text, the parse with it
equals the full parser's — the same declarations and clauses in the same order, every position the same — and a
text the full parser refuses is refused with the same message at the same place. Loaded for an engine (plain facts
kept as rows, ``load_unit``), the analysis of any text is the full parser's: the same facts in the same order with
the same positions, the same predicates, rules and diagnostics. Texts mix plain fact lines with
everything that must not be taken for one: rules spanning lines (a fact-like last line), floats, escapes, keywords,
out-of-range integers, comments, declarations, CRLF endings and broken lines."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.logic import AnalysisError, Engine, ParseError, Position, Program, load_unit, parse_unit
from groundstate.logic.analysis import analyze
from groundstate.logic.ground import MIN_FACTS, split_ground_facts
from groundstate.logic.parser import Parser

PLAIN = [f"edge({i}, {i + 1})." for i in range(MIN_FACTS)]  # enough fact lines for the fast path to apply


def dump(value: Any) -> Any:
    """Everything the parser produced, positions included, as plain tuples."""
    if isinstance(value, Position):
        return ("at", value.source, value.line, value.column, value.line_text)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, *(dump(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, (list, tuple)):
        return tuple(dump(v) for v in value)
    return ("value", type(value).__name__, repr(value))


def outcome(parse: Any, text: str) -> Any:
    try:
        return dump(parse(text))
    except ParseError as error:
        return ("refused", str(error))


def full(text: str) -> Any:
    return Parser(text, "<input>").parse_unit()


def fast(text: str) -> Any:
    return parse_unit(text, "<input>")


LINES = st.sampled_from([
    "p(1, 2).", 'name("Ada Lovelace", /person).', 'odd(-7, "a, b").', "q(/a/b, 3).", "e(1 , 2 ).", "e(1,2).  ",
    "e(1, 2).\r", "x(1.5).", 'x("a\\n").', "bound(1).", "big(99999999999999999999).", "p(1, 2). q(3).",
    "r(X) :- p(X, _).", "r(X) :-", "  p(X, 1).", "p(2, 3).", "s(X) :- p(X, Y),", "t(1).", "t(X) :- s(X).",
    "# a comment.", "", "   ", "Decl p(A, B) bound [/number, /number].", "p(1, 2", "p(1, 2)", "(", ").", "u(1).",
    "v(X) :- u(X) |> do fn:group_by(X).", "w(/a).", "Decl w(A)", "  descr [doc(\"w\")].", "edge(1, 2, 3).",
    "p(/x, 2).", "Decl edge(A, B) bound [/number, /string].", "e(1, 9223372036854775807).", "q(X) :- edge(X, 1).",
])  # fmt: skip


def spliced(lines: list[str], at: int, crlf: bool) -> str:
    """The plain fact lines with ``lines`` spliced in at ``at``, with CRLF endings when asked."""
    text = "\n".join([*PLAIN[:at], *lines, *PLAIN[at:]])
    return text.replace("\n", "\r\n") if crlf else text


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=12), st.integers(0, MIN_FACTS), st.booleans())
def test_the_fast_path_parses_exactly_as_the_full_parser(lines: list[str], at: int, crlf: bool) -> None:
    text = spliced(lines, at, crlf)
    assert outcome(fast, text) == outcome(full, text)


def analysed(unit: Any) -> Any:
    """What the analysis makes of a unit: its facts (order and positions included), predicates and rules, or its
    diagnostics."""
    try:
        program = analyze([unit])
    except AnalysisError as error:
        return ("refused", str(error))
    facts = [(pred, [(repr(values), dump(pos)) for values, pos in rows]) for pred, rows in program.facts.items()]
    predicates = [(name, info.arity) for name, info in program.predicates.items()]
    return facts, predicates, [str(rule.clause) for rule in program.rules]


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=12), st.integers(0, MIN_FACTS), st.booleans())
def test_loaded_for_an_engine_the_analysis_is_the_full_parsers(lines: list[str], at: int, crlf: bool) -> None:
    text = spliced(lines, at, crlf)
    try:
        ours = analysed(load_unit(text, "<input>"))
    except ParseError as error:
        ours = ("unparsed", str(error))
    try:
        theirs = analysed(full(text))
    except ParseError as error:
        theirs = ("unparsed", str(error))
    assert ours == theirs


def test_rows_are_checked_like_clauses() -> None:
    bounded = "Decl edge(A, B) bound [/number, /string]."
    for broken, problem in ((bounded, "does not match the declared bound"), ("edge(1, 2, 3).", "edge has 2 arguments")):
        text = "\n".join([*PLAIN, broken])
        unit = load_unit(text, "<input>")
        assert len(unit.ground) == MIN_FACTS + (broken != bounded)
        assert analysed(unit) == analysed(full(text))
        assert analysed(unit)[0] == "refused" and problem in analysed(unit)[1], analysed(unit)


def test_a_fact_like_line_that_ends_a_rule_is_not_taken_for_a_fact() -> None:
    text = "\n".join([*PLAIN, "p(X) :- q(X),", "r(1).", "s(1.5)."])
    unit = fast(text)
    rule = next(c for c in unit.clauses if c.head.predicate == "p")
    assert [str(lit) for lit in rule.body] == ["q(X)", "r(1)"] and dump(unit) == dump(full(text))


def test_errors_are_the_full_parsers() -> None:
    for broken in ("p(1, 2", "bound(1).", "big(99999999999999999999).", "Decl p(X)\nq(1)."):
        text = "\n".join([*PLAIN, broken, *PLAIN])
        assert outcome(fast, text) == outcome(full, text)
        assert outcome(fast, text)[0] == "refused"


def test_plain_fact_files_take_the_fast_path_and_unsafe_ones_do_not() -> None:
    split = split_ground_facts("\n".join(PLAIN), "<input>")
    assert split is not None and len(split[1]) == MIN_FACTS and split[0].strip() == ""
    assert split_ground_facts("\n".join([*PLAIN, "doc(`multi", "line`)."]), "<input>") is None  # a backtick string
    assert split_ground_facts("\n".join(["Package p!", *PLAIN]), "<input>") is None
    assert split_ground_facts("\n".join(PLAIN[:3]), "<input>") is None  # too few to be worth it


def test_a_program_of_facts_evaluates_the_same() -> None:
    text = "\n".join([*PLAIN, "path(X, Y) :- edge(X, Y).", "path(X, Z) :- edge(X, Y), path(Y, Z)."])
    engine = Engine(Program.parse(text))
    engine.evaluate()
    assert len(engine.query("path(0, Y)")) == MIN_FACTS
