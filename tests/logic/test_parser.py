"""Lexer and parser: the AST keeps positions, and any input gives an AST or a positioned ParseError."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.logic import (
    Apply,
    Atom,
    Comparison,
    Const,
    Float,
    List,
    Name,
    Negation,
    ParseError,
    Program,
    Var,
    parse_atom,
    parse_unit,
)
from groundstate.logic.parser import MAX_NESTING

GOLDEN_TEXTS = [p.read_text(encoding="utf-8") for p in sorted((Path(__file__).parent / "golden").glob("*.mg"))]


def test_clause_structure_and_positions() -> None:
    unit = parse_unit("p(X) :- q(X, /a), !r(X, _), X < 3 |> let Y = fn:plus(X, 1).\n", "f.mg")
    clause = unit.clauses[0]
    assert clause.head.predicate == "p" and (clause.pos.line, clause.pos.column) == (1, 1)
    q, r, cmp = clause.body
    assert isinstance(q, Atom) and isinstance(q.args[1], Const) and q.args[1].value is Name("/a")
    assert (q.pos.line, q.pos.column) == (1, 9)
    assert isinstance(r, Negation) and isinstance(r.atom.args[1], Var) and r.atom.args[1].name == "_"
    assert isinstance(cmp, Comparison) and cmp.op == "<"
    assert clause.transform is not None and clause.transform.lets[0].var.name == "Y"


def test_zero_arity_both_spellings_and_trailing_commas() -> None:
    unit = parse_unit("ready. ok(). p(1, 2,) :- ready, ok(), .")
    assert [c.head.predicate for c in unit.clauses] == ["ready", "ok", "p"]
    assert unit.clauses[0].head.args == () and unit.clauses[1].head.args == ()
    assert len(unit.clauses[2].body) == 2


def test_unicode_arrow_and_dotted_and_colon_names() -> None:
    unit = parse_unit('foo.bar(X) ⟸ baz:qux(X), :string:contains(X, "a").')
    assert unit.clauses[0].head.predicate == "foo.bar"
    assert [lit.predicate for lit in unit.clauses[0].body] == ["baz:qux", ":string:contains"]  # type: ignore[union-attr]


def test_compound_literals_become_function_applications() -> None:
    atom = unit_head("p([1, 2], [/k: 1], {/f: 2}, [], {}).")
    assert [a.function for a in atom.args] == ["fn:list", "fn:map", "fn:struct", "fn:list", "fn:struct"]  # type: ignore[union-attr]


def unit_head(text: str) -> Atom:
    return parse_unit(text).clauses[0].head


def test_numbers() -> None:
    args = unit_head("p(1, -2, 1.5, -0.5, .25, 1e3, 2.5E-2).").args
    values = [a.value for a in args]  # type: ignore[union-attr]
    assert values == [1, -2, Float(1.5), Float(-0.5), Float(0.25), Float(1000.0), Float(0.025)]
    assert [type(v) for v in values] == [int, int, Float, Float, Float, Float, Float]


def test_name_constant_swallows_a_dot() -> None:
    with pytest.raises(ParseError) as info:
        parse_unit("p(X) :- X = /bar.")
    assert "end of input" in info.value.message
    assert parse_unit("p(X) :- X = /bar .").clauses[0].body[0].right.value is Name("/bar")  # type: ignore[union-attr]


def test_package_and_use() -> None:
    unit = parse_unit("Package acme!\nUse util!\np(1).")
    assert unit.package == "acme" and unit.uses == ["util"]


def test_decl() -> None:
    decl = parse_unit('Decl p(X, Y) descr [doc("d"), mode("+", "-")] bound [/string, fn:List(/number)].').decls[0]
    assert decl.atom.predicate == "p" and decl.descriptor("doc") is not None
    assert isinstance(decl.bounds[0][1], Apply) and decl.bounds[0][1].function == "fn:List"


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("p(1", 1, 4, "expected ',' or ')'"),
        ("p(1).\nq(X) :- .", 2, 9, "expected a term"),
        ('p("a\\q").', 1, 5, "unknown escape"),
        ('p("\\u{D800}").', 1, 4, "not a Unicode scalar value"),
        ("p(_x).", 1, 3, "'_' alone is the wildcard"),
        ("p(foo).", 1, 3, "is not a value"),
        ("p(1) :- q(1) |> let x = fn:plus(1).", 1, 21, "expected a variable after 'let'"),
        ("p(1) :- q(1) |> do fn:count().", 1, 20, "expected fn:group_by"),
        ("Decl p(X) bound /string.", 1, 17, "expected '['"),
        ("p(1). Package x!", 1, 7, "must come before"),
        ("p(1) @", 1, 6, "unexpected character"),
        ("p(12abc).", 1, 3, "malformed number"),
    ],
)
def test_parse_errors_are_positioned(text: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_unit(text, "t.mg")
    error = info.value
    assert (error.source, error.line, error.column) == ("t.mg", line, column), error
    assert fragment in error.message
    lines = str(error).splitlines()
    assert lines[0].startswith(f"t.mg:{line}:{column}: error: ")
    assert lines[2].index("^") - 2 == column - 1


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    deep = "p(" + "[" * (MAX_NESTING + 5) + "]" * (MAX_NESTING + 5) + ")."
    with pytest.raises(ParseError) as info:
        parse_unit(deep)
    assert "nested" in info.value.message
    assert isinstance(unit_head("p(" + "[" * 50 + "]" * 50 + ").").args[0], Apply)


def test_query_atoms() -> None:
    assert parse_atom("path(/a, X).").predicate == "path"
    with pytest.raises(ParseError):
        parse_atom("path(/a, X) extra")


def _parses_or_positioned_error(text: str) -> None:
    try:
        Program.parse(text, "fuzz.mg")
    except ParseError as error:
        assert error.position is not None and error.line >= 1 and error.column >= 1
        assert error.line <= text.count("\n") + 1


ALPHABET = st.sampled_from([*list("pqXY_/a.,:-()[]{}!=<>|\"'`#\\ \n0123456789efn"), "fn:", "let ", "do ", "Decl ", "⟸"])


@settings(max_examples=600, deadline=None)
@given(st.lists(ALPHABET, max_size=60).map("".join))
def test_random_token_soup_only_gives_ast_or_parse_error(text: str) -> None:
    _parses_or_positioned_error(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_random_text_only_gives_ast_or_parse_error(text: str) -> None:
    _parses_or_positioned_error(text)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(GOLDEN_TEXTS),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3), st.text(max_size=3)), min_size=1, max_size=4),
)
def test_mutated_programs_only_give_ast_or_parse_error(text: str, edits: list[tuple[int, int, str]]) -> None:
    for at, delete, insert in edits:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + delete :]
    _parses_or_positioned_error(text)


def test_golden_programs_parse_and_list_values_round_trip() -> None:
    for text in GOLDEN_TEXTS:
        Program.parse(text)
    assert unit_head("p([1]).").args[0].function == "fn:list"  # type: ignore[union-attr]
    assert List([1]) != (1,)
