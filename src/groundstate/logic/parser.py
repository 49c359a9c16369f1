"""Recursive-descent parser: text to a SourceUnit, or a positioned ParseError and nothing else."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .ast import (
    Apply,
    Atom,
    Clause,
    Comparison,
    Const,
    Decl,
    Let,
    Literal,
    Negation,
    SourceUnit,
    Term,
    Transform,
    Var,
)
from .errors import ParseError, Position
from .gcpause import gc_paused
from .ground import boundaries_hold, split_ground_facts, with_clauses
from .lexer import BYTES, EOF, FLOAT, IDENT, INT, KEYWORD, NAME, PUNCT, STRING, VAR, Lexer, Token

T = TypeVar("T")
MAX_NESTING = 200
_COMPARISON_OPS = ("=", "!=", "<", "<=", ">", ">=")


class Parser:
    def __init__(self, text: str, source: str) -> None:
        self.tokens = Lexer(text, source).tokens()
        self.k = 0
        self.depth = 0

    # -- token helpers -------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.k]

    def advance(self) -> Token:
        tok = self.tokens[self.k]
        if tok.kind != EOF:
            self.k += 1
        return tok

    def at(self, kind: str, text: str | None = None) -> bool:
        tok = self.tok
        return tok.kind == kind and (text is None or tok.text == text)

    def at_punct(self, text: str) -> bool:
        tok = self.tokens[self.k]
        return tok.kind == PUNCT and tok.text == text

    def expect_punct(self, text: str, context: str) -> Token:
        if not self.at_punct(text):
            raise self.error(f"expected '{text}' {context}, found {self.tok.describe()}")
        return self.advance()

    def error(self, message: str, pos: Position | None = None) -> ParseError:
        return ParseError(message, pos or self.tok.pos)

    # -- program -------------------------------------------------------
    def parse_unit(self) -> SourceUnit:
        unit = SourceUnit(source=self.tok.pos.source)
        if self.at(KEYWORD, "Package"):
            self.advance()
            unit.package = self.package_name("Package")
        while self.at(KEYWORD, "Use"):
            self.advance()
            unit.uses.append(self.package_name("Use"))
        while not self.at(EOF):
            if self.at(KEYWORD, "Decl"):
                unit.decls.append(self.decl())
            elif self.at(KEYWORD, "Package") or self.at(KEYWORD, "Use"):
                raise self.error(f"'{self.tok.text}' must come before every declaration and clause")
            else:
                unit.clauses.append(self.clause())
        return unit

    def package_name(self, keyword: str) -> str:
        if not self.at(IDENT) or self.tok.text.startswith((":", "fn:")):
            raise self.error(f"expected a package name after '{keyword}', found {self.tok.describe()}")
        name = self.advance().text
        self.expect_punct("!", f"after the package name in '{keyword} {name}'")
        return name

    def decl(self) -> Decl:
        start = self.advance().pos
        atom = self.atom("after 'Decl'")
        descriptors: list[Atom] = []
        bounds: list[tuple[Term, ...]] = []
        while True:
            if self.at(KEYWORD, "descr") or self.at(KEYWORD, "inclusion"):
                keyword = self.advance().text
                self.expect_punct("[", f"after '{keyword}'")
                context = f"in '{keyword}'"
                items = self.comma_list("]", lambda context=context: self.atom(context))  # type: ignore[misc]
                if keyword == "descr":
                    descriptors.extend(items)
            elif self.at(KEYWORD, "bound"):
                self.advance()
                self.expect_punct("[", "after 'bound'")
                bounds.append(tuple(self.comma_list("]", self.term)))
            else:
                break
        self.expect_punct(".", "at the end of the declaration")
        return Decl(atom, tuple(descriptors), tuple(bounds), start)

    def clause(self) -> Clause:
        head = self.atom("at the start of a clause")
        body: list[Literal] = []
        transform = None
        if self.at_punct(":-"):
            self.advance()
            body.append(self.literal())
            while self.at_punct(","):
                self.advance()
                if self.at_punct(".") or self.at_punct("|>"):
                    break
                body.append(self.literal())
            if self.at_punct("|>"):
                transform = self.transform()
        elif not self.at_punct("."):
            raise self.error(f"expected ':-' or '.' after {head}, found {self.tok.describe()}")
        self.expect_punct(".", "at the end of the clause")
        return Clause(head, tuple(body), transform, head.pos)

    def comma_list(self, closer: str, item: Callable[[], T]) -> list[T]:
        """Items separated by commas (a trailing comma allowed) up to ``closer``."""
        items: list[T] = []
        tokens = self.tokens
        while True:
            tok = tokens[self.k]
            if tok.kind == PUNCT and tok.text == closer:
                break
            items.append(item())
            tok = tokens[self.k]
            if tok.kind == PUNCT and tok.text == ",":
                self.k += 1
            elif not (tok.kind == PUNCT and tok.text == closer):
                raise self.error(f"expected ',' or '{closer}', found {tok.describe()}")
        self.advance()
        return items

    # -- literals ------------------------------------------------------
    def atom(self, context: str) -> Atom:
        tok = self.tok
        if tok.kind != IDENT or tok.text.startswith("fn:"):
            raise self.error(f"expected a predicate name {context}, found {tok.describe()}")
        self.advance()
        args: list[Term] = []
        if self.at_punct("("):
            self.advance()
            args = self.comma_list(")", self.term)
        return Atom(tok.text, tuple(args), tok.pos)

    def literal(self) -> Literal:
        if self.at_punct("!"):
            bang = self.advance()
            if not self.at(IDENT) or self.tok.text.startswith("fn:"):
                raise self.error(f"expected a predicate after '!', found {self.tok.describe()}")
            return Negation(self.atom("after '!'"), bang.pos)
        if self.at(IDENT) and not self.tok.text.startswith("fn:"):
            return self.atom("in the body")
        left = self.term()
        if not (self.tok.kind == PUNCT and self.tok.text in _COMPARISON_OPS):
            raise self.error(f"expected a comparison (= != < <= > >=) after {left}, found {self.tok.describe()}")
        op = self.advance().text
        right = self.term()
        return Comparison(op, left, right, left.pos)

    def transform(self) -> Transform:
        start = self.advance().pos
        group_by: tuple[Var, ...] | None = None
        lets: list[Let] = []
        if self.at(KEYWORD, "do"):
            self.advance()
            if not self.at(IDENT, "fn:group_by"):
                raise self.error(f"expected fn:group_by(...) after 'do', found {self.tok.describe()}")
            self.advance()
            self.expect_punct("(", "after fn:group_by")
            group_by = tuple(self.comma_list(")", self.group_var))
            if not self.at_punct(","):
                return Transform(group_by, (), start)
            self.advance()
        lets.append(self.let())
        while self.at_punct(","):
            self.advance()
            if self.at_punct("."):
                break
            lets.append(self.let())
        return Transform(group_by, tuple(lets), start)

    def group_var(self) -> Var:
        if not self.at(VAR) or self.tok.text == "_":
            raise self.error(f"fn:group_by takes variables, found {self.tok.describe()}")
        tok = self.advance()
        return Var(tok.text, tok.pos)

    def let(self) -> Let:
        if not self.at(KEYWORD, "let"):
            raise self.error(f"expected 'let' in the transform, found {self.tok.describe()}")
        start = self.advance().pos
        if not self.at(VAR) or self.tok.text == "_":
            raise self.error(f"expected a variable after 'let', found {self.tok.describe()}")
        var_tok = self.advance()
        self.expect_punct("=", f"after 'let {var_tok.text}'")
        if not (self.at(IDENT) and self.tok.text.startswith("fn:")):
            raise self.error(f"expected a function application fn:...(...) in let, found {self.tok.describe()}")
        expr = self.term()
        assert isinstance(expr, Apply)
        return Let(Var(var_tok.text, var_tok.pos), expr, start)

    # -- terms ---------------------------------------------------------
    def term(self) -> Term:
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise self.error(f"expression nested more than {MAX_NESTING} levels deep")
            return self._term()
        finally:
            self.depth -= 1

    def _term(self) -> Term:
        tok = self.tok
        kind = tok.kind
        if kind == VAR:
            self.advance()
            return Var(tok.text, tok.pos)
        if kind in (NAME, INT, FLOAT, STRING, BYTES):
            self.advance()
            return Const(tok.value, tok.pos)
        if kind == IDENT and tok.text.startswith("fn:"):
            self.advance()
            self.expect_punct("(", f"after the function name {tok.text}")
            return Apply(tok.text, tuple(self.comma_list(")", self.term)), tok.pos)
        if kind == PUNCT and tok.text == "[":
            return self.list_or_map()
        if kind == PUNCT and tok.text == "{":
            return self.struct()
        if kind == IDENT:
            raise self.error(
                f"'{tok.text}' is not a value: constants are /names, numbers or strings; functions start with fn:"
            )
        raise self.error(f"expected a term, found {tok.describe()}")

    def list_or_map(self) -> Apply:
        start = self.advance().pos
        if self.at_punct("]"):
            self.advance()
            return Apply("fn:list", (), start)
        first = self.term()
        if self.at_punct(":"):
            return Apply("fn:map", tuple(self.entries(first, "]")), start)
        items = [first]
        if self.at_punct(","):
            self.advance()
            items.extend(self.comma_list("]", self.term))
        else:
            self.expect_punct("]", "to close the list")
        return Apply("fn:list", tuple(items), start)

    def struct(self) -> Apply:
        start = self.advance().pos
        if self.at_punct("}"):
            self.advance()
            return Apply("fn:struct", (), start)
        first = self.term()
        return Apply("fn:struct", tuple(self.entries(first, "}")), start)

    def entries(self, first_key: Term, closer: str) -> list[Term]:
        """``k: v, k: v`` after the first key, up to and including the closer."""
        flat: list[Term] = []
        key = first_key
        while True:
            self.expect_punct(":", f"after the key {key}")
            flat.extend((key, self.term()))
            if self.at_punct(","):
                self.advance()
            elif not self.at_punct(closer):
                raise self.error(f"expected ',' or '{closer}', found {self.tok.describe()}")
            if self.at_punct(closer):
                self.advance()
                return flat
            key = self.term()


def parse_unit(text: str, source: str = "<input>") -> SourceUnit:
    """Parse one file into its syntax tree; raises ParseError (and nothing else) on malformed input."""
    return with_clauses(load_unit(text, source))


def load_unit(text: str, source: str = "<input>") -> SourceUnit:
    """Parse one file for an engine: as ``parse_unit``, except that many lines of plain facts are kept as rows in
    ``unit.ground`` (logic/ground.py) instead of syntax trees — what a program of a hundred thousand facts loads in
    a fraction of the time. Raises ParseError (and nothing else) on malformed input, the same as ``parse_unit``."""
    if not isinstance(text, str):
        raise TypeError("program text must be a str")
    split = split_ground_facts(text, source)
    if split is not None:  # many lines that are plain facts: those without the tokenizer
        rest, rows = split
        try:
            with gc_paused():
                unit = Parser(rest, source).parse_unit()
        except ParseError:
            unit = None
        if unit is not None and boundaries_hold(unit, rest, [row.pos.line for row in rows]):
            unit.ground = rows
            return unit
    with gc_paused():  # the full parser, and its own diagnostics
        return Parser(text, source).parse_unit()


def parse_atom(text: str, source: str = "<query>") -> Atom:
    """Parse a query pattern such as ``path(/a, X)`` (a trailing '.' is allowed)."""
    parser = Parser(text, source)
    atom = parser.atom("in the query")
    if parser.at_punct("."):
        parser.advance()
    if not parser.at(EOF):
        raise parser.error(f"unexpected {parser.tok.describe()} after the query atom")
    return atom


__all__ = ["ParseError", "load_unit", "parse_atom", "parse_unit"]
