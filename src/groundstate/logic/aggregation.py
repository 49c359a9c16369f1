"""The ``|> do fn:group_by(...)`` transform: group distinct body rows, reduce, build head facts."""

from __future__ import annotations

from typing import Any

from .analysis import Rule
from .ast import Apply, Const, Term, Var
from .builtins import FUNCTIONS, REDUCERS
from .values import sort_facts


def evaluate_term(term: Term, env: dict[str, Any]) -> Any:
    if isinstance(term, Var):
        return env[term.name]
    if isinstance(term, Const):
        return term.value
    assert isinstance(term, Apply)
    return FUNCTIONS[term.function](*(evaluate_term(a, env) for a in term.args))


def aggregate(rule: Rule, row_vars: tuple[str, ...], rows: set[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    """Head facts of an aggregating rule from the set of its distinct body rows (one per non-empty group)."""
    transform = rule.transform
    assert transform is not None and transform.group_by is not None
    position = {name: i for i, name in enumerate(row_vars)}
    key_positions = [position[v.name] for v in transform.group_by]
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for row in sort_facts(rows):  # sorted so that collected lists come out the same every run
        groups.setdefault(tuple(row[i] for i in key_positions), []).append(row)
    heads: set[tuple[Any, ...]] = set()
    for key, members in groups.items():
        env: dict[str, Any] = {v.name: value for v, value in zip(transform.group_by, key, strict=True)}
        for let in transform.lets:
            expr = let.expr
            if expr.function in REDUCERS:
                _, reduce = REDUCERS[expr.function]
                arg_rows = [
                    tuple(evaluate_term(a, {n: row[i] for n, i in position.items()}) for a in expr.args)
                    for row in members
                ]
                env[let.var.name] = reduce(arg_rows)
            else:
                env[let.var.name] = evaluate_term(expr, env)
        heads.add(tuple(evaluate_term(a, env) for a in rule.head.args))
    return heads
