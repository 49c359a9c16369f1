"""Join order for one rule body: which literal runs when, given what a seed has already bound.

Checks that cannot fail run first, as soon as their inputs are bound: a stored atom whose every argument is bound
(a membership test) and a negation of one. Then the other filters (comparisons, built-ins) and literals that compute
a value (``R = fn:string:concat(...)``), in body order as soon as their inputs are bound, so a row a membership test
rejects never has a value built: the MCP guard's policy words a reason for every candidate row, and most rows are
rejected by a membership test. Among the stored atoms that bind something, the one with the most bound arguments
goes next, so it is read through an index. The order never changes what a rule derives (its body is a
conjunction); it decides which rows a function is evaluated on, and so whether a function's failure on a row the
rule rejects anyway is raised: one that a membership test or a negation rejects first is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from .analysis import PredicateInfo, Rule
from .ast import Apply, Atom, Comparison, Const, Literal, Negation, Term, Var
from .builtins import PREDICATES

SEED_POSITIVE = "positive"  # the seed supplies facts for a positive atom of the body
SEED_NEGATIVE = "negative"  # the seed supplies facts matching a negated atom (binding its variables)
SEED_HEAD = "head"  # the seed supplies candidate head facts (to re-derive them)


@dataclass(frozen=True)
class Seed:
    kind: str
    literal: int = -1  # index into the body, for positive and negative seeds


def term_vars(term: Term) -> set[str]:
    if isinstance(term, Var):
        return set() if term.name == "_" else {term.name}
    if isinstance(term, Apply):
        out: set[str] = set()
        for arg in term.args:
            out |= term_vars(arg)
        return out
    return set()


def _ground(term: Term, bound: set[str]) -> bool:
    return (
        isinstance(term, Const)
        or (not isinstance(term, Var) and term_vars(term) <= bound)
        or (isinstance(term, Var) and term.name in bound)
    )


def input_positions(atom: Atom, predicates: dict[str, PredicateInfo]) -> tuple[int, ...] | None:
    """Arguments that must be bound before a computed atom runs; None for a stored relation."""
    if atom.predicate.startswith(":"):
        return PREDICATES[atom.predicate].inputs
    info = predicates.get(atom.predicate)
    if info is not None and info.modes is not None:
        return tuple(i for i, m in enumerate(info.modes) if m == "+")
    return None


def _ready(lit: Literal, bound: set[str], predicates: dict[str, PredicateInfo]) -> bool:
    if isinstance(lit, Negation):
        return all(_ground(a, bound) or (isinstance(a, Var) and a.name == "_") for a in lit.atom.args)
    if isinstance(lit, Comparison):
        if lit.op == "=":
            left_ok, right_ok = _ground(lit.left, bound), _ground(lit.right, bound)
            return (
                (left_ok and right_ok)
                or (left_ok and isinstance(lit.right, Var))
                or (right_ok and isinstance(lit.left, Var))
            )
        return _ground(lit.left, bound) and _ground(lit.right, bound)
    inputs = input_positions(lit, predicates)
    assert inputs is not None
    return all(_ground(lit.args[i], bound) for i in inputs)


def literal_binds(lit: Literal) -> set[str]:
    if isinstance(lit, Atom):
        return {a.name for a in lit.args if isinstance(a, Var) and a.name != "_"}
    if isinstance(lit, Comparison) and lit.op == "=":
        return term_vars(lit.left) | term_vars(lit.right)
    return set()


def order_body(rule: Rule, seed: Seed | None, predicates: dict[str, PredicateInfo]) -> tuple[list[int], set[str]]:
    """Body literal indices in execution order (the positive seed literal left out) and the seed's variables."""
    body = rule.body
    bound: set[str] = set()
    remaining = list(range(len(body)))
    if seed is not None:
        if seed.kind == SEED_HEAD:
            bound |= {a.name for a in rule.head.args if isinstance(a, Var)}
        else:
            lit = body[seed.literal]
            atom = lit.atom if isinstance(lit, Negation) else lit
            assert isinstance(atom, Atom)
            bound |= literal_binds(atom)
            if seed.kind == SEED_POSITIVE:
                remaining.remove(seed.literal)
    order: list[int] = []
    while remaining:
        checks = [i for i in remaining if _binds_nothing(body[i], bound, predicates)]
        if checks:
            order += checks
            remaining = [i for i in remaining if i not in checks]
            continue
        ready = [i for i in remaining if not _is_stored(body[i], predicates) and _ready(body[i], bound, predicates)]
        if ready:
            for i in ready:
                order.append(i)
                remaining.remove(i)
                bound |= literal_binds(body[i])
            continue
        stored = [i for i in remaining if _is_stored(body[i], predicates)]
        if not stored:
            raise AssertionError(f"no literal of {rule.clause} can run; analysis should have rejected it")
        best = max(stored, key=lambda i: (_bound_args(body[i], bound), -i))
        order.append(best)
        remaining.remove(best)
        bound |= literal_binds(body[best])
    return order, bound


def _binds_nothing(lit: Literal, bound: set[str], predicates: dict[str, PredicateInfo]) -> bool:
    """Whether ``lit`` can run now, only checks and cannot fail: a stored atom whose arguments are all bound (a
    membership test) or a negation of one, with no function among its arguments. A comparison or a built-in may
    raise (``fn:div(X, Y) < 3``): moved ahead of a literal that yields no row for it (``:list:member`` of an empty
    list), it would raise where the rule meets no row at all, so those keep their place."""
    atom = lit.atom if isinstance(lit, Negation) else lit
    if not isinstance(atom, Atom) or not _is_stored(atom, predicates):
        return False
    return all(isinstance(a, Const) or (isinstance(a, Var) and (a.name == "_" or a.name in bound)) for a in atom.args)


def _is_stored(lit: Literal, predicates: dict[str, PredicateInfo]) -> bool:
    return isinstance(lit, Atom) and input_positions(lit, predicates) is None


def _bound_args(lit: Literal, bound: set[str]) -> int:
    assert isinstance(lit, Atom)
    return sum(1 for a in lit.args if _ground(a, bound))
