"""mangle_updates checked with the logic engine's own parser and the kernel's declarations.

An update is accepted only if it is exactly one ground fact — no rule, no Decl, no variable, no function
other than the list/map/struct/pair constructors — of a predicate the schema declares, with the declared
arity and type bounds, and on the caller's allowlist. Anything else is dropped with the reason; the rest of
the packet is kept.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..logic.analysis import PredicateInfo, bounds_problem
from ..logic.ast import Apply, Const, Term, Var
from ..logic.builtins import FUNCTIONS, BuiltinError
from ..logic.errors import LogicError
from ..logic.parser import parse_unit
from ..logic.values import display_fact

CONSTRUCTORS = ("fn:list", "fn:map", "fn:struct", "fn:pair")


@dataclass(frozen=True)
class AcceptedUpdate:
    text: str
    predicate: str
    fact: tuple[Any, ...]


@dataclass(frozen=True)
class DroppedUpdate:
    update: str
    reason: str


@dataclass
class UpdateCheck:
    accepted: list[AcceptedUpdate] = field(default_factory=list)
    dropped: list[DroppedUpdate] = field(default_factory=list)


class UpdateValidator:
    """``allowlist`` None means every declared predicate that is neither external nor in ``derived`` (the
    predicates rules define: asserting one would bypass the policy). Use None only with a trusted model."""

    def __init__(
        self,
        predicates: Mapping[str, PredicateInfo],
        allowlist: Collection[str] | None,
        *,
        derived: Collection[str] = (),
        max_updates: int = 2000,
        max_update_chars: int = 1000,
    ) -> None:
        self.predicates = predicates
        self.derived = frozenset(derived)
        self.allowlist = None if allowlist is None else frozenset(allowlist)
        self.max_updates = max_updates
        self.max_update_chars = max_update_chars

    def check(self, updates: list[str]) -> UpdateCheck:
        result = UpdateCheck()
        for number, update in enumerate(updates):
            if number >= self.max_updates:
                result.dropped.append(DroppedUpdate(update, f"more than {self.max_updates} updates in one packet"))
                continue
            accepted = self.check_one(update)
            if isinstance(accepted, AcceptedUpdate):
                result.accepted.append(accepted)
            else:
                result.dropped.append(DroppedUpdate(update, accepted))
        return result

    def check_one(self, update: str) -> AcceptedUpdate | str:
        """The accepted update, or why it was dropped."""
        if len(update) > self.max_update_chars:
            return f"longer than {self.max_update_chars} characters ({len(update)})"
        text = update.strip()
        try:
            unit = parse_unit(text if text.endswith(".") else text + ".", "<mangle_update>")
        except LogicError as exc:
            return f"not valid Mangle: {exc}"
        if unit.decls or unit.package or unit.uses:
            return "declarations, Package and Use are not allowed in updates"
        if len(unit.clauses) != 1:
            return f"an update must be exactly one fact, found {len(unit.clauses)} clauses"
        clause = unit.clauses[0]
        if not clause.is_fact:
            return "rules are not allowed in updates, only ground facts"
        head = clause.head
        try:
            fact = tuple(_ground(arg) for arg in head.args)
        except ValueError as exc:
            return str(exc)
        info = self.predicates.get(head.predicate)
        if info is None or info.decl is None:
            return f"{head.predicate} is not declared in the kernel's schemas"
        if info.external:
            return f"{head.predicate} is an external predicate; it cannot be asserted"
        if head.predicate in self.derived:
            return f"{head.predicate} is derived by the policy; it cannot be asserted"
        if info.arity != len(fact):
            return f"{head.predicate} has {info.arity} arguments, the update gives {len(fact)}"
        problem = bounds_problem(info, fact)
        if problem:
            return problem
        if self.allowlist is not None and head.predicate not in self.allowlist:
            return f"{head.predicate} is not on the allowlist of predicates the model may assert"
        return AcceptedUpdate(display_fact(head.predicate, fact), head.predicate, fact)


def _ground(term: Term) -> Any:
    if isinstance(term, Const):
        return term.value
    if isinstance(term, Var):
        raise ValueError(f"variable {term.name} in an update: updates must be ground facts")
    assert isinstance(term, Apply)
    if term.function not in CONSTRUCTORS:
        raise ValueError(f"function {term.function} in an update: only constants and {', '.join(CONSTRUCTORS)}")
    try:
        return FUNCTIONS[term.function](*(_ground(arg) for arg in term.args))
    except BuiltinError as exc:
        raise ValueError(f"{term.function}: {exc}") from None
