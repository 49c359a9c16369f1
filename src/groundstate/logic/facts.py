"""One ground fact from text, read by the engine's own parser: how a model's ``mangle_updates`` become facts.

A ground fact is one clause with no body, no variables, and no function other than the list / map / struct / pair
constructors; declarations, ``Package`` and ``Use`` are refused. Everything else is a ``NotAGroundFact`` whose
message says what the text contained instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .ast import Apply, Const, Term, Var
from .builtins import FUNCTIONS, BuiltinError
from .errors import LogicError, NotAGroundFact
from .parser import parse_unit

CONSTRUCTORS = ("fn:list", "fn:map", "fn:struct", "fn:pair")


@dataclass(frozen=True)
class GroundFact:
    """A fact without variables, as parsed from text: its predicate and values."""

    predicate: str
    args: tuple[Any, ...]


def parse_ground_fact(text: str, source: str = "<fact>") -> GroundFact:
    """The fact ``text`` states (a final period is optional), or NotAGroundFact saying why it is not one."""
    text = text.strip()
    try:
        unit = parse_unit(text if text.endswith(".") else text + ".", source)
    except LogicError as exc:
        raise NotAGroundFact(f"not valid Mangle: {exc}") from None
    if unit.decls or unit.package or unit.uses:
        raise NotAGroundFact("declarations, Package and Use are not allowed in updates")
    if len(unit.clauses) != 1:
        raise NotAGroundFact(f"an update must be exactly one fact, found {len(unit.clauses)} clauses")
    clause = unit.clauses[0]
    if not clause.is_fact:
        raise NotAGroundFact("rules are not allowed in updates, only ground facts")
    return GroundFact(clause.head.predicate, tuple(_ground(arg) for arg in clause.head.args))


def _ground(term: Term) -> Any:
    if isinstance(term, Const):
        return term.value
    if isinstance(term, Var):
        raise NotAGroundFact(f"variable {term.name} in an update: updates must be ground facts")
    assert isinstance(term, Apply)  # the parser makes only these three kinds of term
    if term.function not in CONSTRUCTORS:
        raise NotAGroundFact(f"function {term.function} in an update: only constants and {', '.join(CONSTRUCTORS)}")
    try:
        return FUNCTIONS[term.function](*(_ground(arg) for arg in term.args))
    except BuiltinError as exc:
        raise NotAGroundFact(f"{term.function}: {exc}") from None
