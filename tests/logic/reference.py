"""A deliberately simple naive evaluator, the oracle the engine is checked against.

It shares only the parser, the analysis (for strata) and the built-in functions with the engine:
bodies are interpreted literal by literal in the written order (negations last), every rule is
re-run over all facts until nothing changes, and aggregates are computed from scratch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from groundstate.logic import FUNCTIONS, Apply, Atom, Comparison, Const, Negation, Program, Term, Var
from groundstate.logic.builtins import PREDICATES, REDUCERS, UNBOUND, compare
from groundstate.logic.values import fact_sort_key

Facts = dict[str, set[tuple[Any, ...]]]


def _value(term: Term, env: dict[str, Any]) -> Any:
    if isinstance(term, Var):
        return env[term.name]
    if isinstance(term, Const):
        return term.value
    assert isinstance(term, Apply)
    return FUNCTIONS[term.function](*(_value(a, env) for a in term.args))


def _match(args: tuple[Term, ...], fact: tuple[Any, ...], env: dict[str, Any]) -> dict[str, Any] | None:
    out = dict(env)
    for arg, value in zip(args, fact, strict=True):
        if isinstance(arg, Var):
            if arg.name == "_":
                continue
            if arg.name in out:
                if out[arg.name] != value:
                    return None
            else:
                out[arg.name] = value
        elif _value(arg, out) != value:
            return None
    return out


def _solve(body: list[Any], facts: Facts, env: dict[str, Any]) -> list[dict[str, Any]]:
    if not body:
        return [env]
    lit, rest = body[0], body[1:]
    results: list[dict[str, Any]] = []
    if isinstance(lit, Negation):
        if not any(_match(lit.atom.args, f, env) is not None for f in facts.get(lit.atom.predicate, ())):
            results.extend(_solve(rest, facts, env))
        return results
    if isinstance(lit, Comparison):
        if lit.op == "=" and isinstance(lit.left, Var) and lit.left.name not in env:
            return _solve(rest, facts, {**env, lit.left.name: _value(lit.right, env)})
        if lit.op == "=" and isinstance(lit.right, Var) and lit.right.name not in env:
            return _solve(rest, facts, {**env, lit.right.name: _value(lit.left, env)})
        left, right = _value(lit.left, env), _value(lit.right, env)
        tests: dict[str, Callable[[], bool]] = {
            "=": lambda: left == right,
            "!=": lambda: left != right,
            "<": lambda: compare(":lt", left, right),
            "<=": lambda: compare(":le", left, right),
            ">": lambda: compare(":gt", left, right),
            ">=": lambda: compare(":ge", left, right),
        }
        return _solve(rest, facts, env) if tests[lit.op]() else []
    assert isinstance(lit, Atom)
    if lit.predicate.startswith(":"):
        args = [
            UNBOUND if isinstance(a, Var) and (a.name == "_" or a.name not in env) else _value(a, env) for a in lit.args
        ]
        candidates = list(PREDICATES[lit.predicate].solve(*args))
    else:
        candidates = list(facts.get(lit.predicate, ()))
    for fact in candidates:
        bound = _match(lit.args, fact, env)
        if bound is not None:
            results.extend(_solve(rest, facts, bound))
    return results


def _heads(rule: Any, facts: Facts) -> set[tuple[Any, ...]]:
    body = [lit for lit in rule.body if not isinstance(lit, Negation)]
    body += [lit for lit in rule.body if isinstance(lit, Negation)]
    envs = _solve(body, facts, {})
    transform = rule.transform
    if transform is None:
        return {tuple(_value(a, env) for a in rule.head.args) for env in envs}
    if transform.group_by is None:
        out = set()
        for env in envs:
            for let in transform.lets:
                env = {**env, let.var.name: _value(let.expr, env)}
            out.add(tuple(_value(a, env) for a in rule.head.args))
        return out
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    rows = _distinct_rows(rule, facts, envs)
    for key in sorted(rows, key=lambda k: repr(k)):
        env = rows[key]
        groups.setdefault(tuple(env[v.name] for v in transform.group_by), []).append(env)
    out = set()
    for key, members in groups.items():
        env = dict(zip([v.name for v in transform.group_by], key, strict=True))
        for let in transform.lets:
            if let.expr.function in REDUCERS:
                _, reduce = REDUCERS[let.expr.function]
                env[let.var.name] = reduce([tuple(_value(a, m) for a in let.expr.args) for m in members])
            else:
                env[let.var.name] = _value(let.expr, env)
        out.add(tuple(_value(a, env) for a in rule.head.args))
    return out


def _distinct_rows(rule: Any, facts: Facts, envs: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Distinct rows over the named variables; for a single-atom body, the matching facts themselves."""
    rows: dict[Any, dict[str, Any]] = {}
    if len(rule.body) == 1 and isinstance(rule.body[0], Atom) and not rule.body[0].predicate.startswith(":"):
        atom = rule.body[0]
        for fact in facts.get(atom.predicate, ()):
            matched = _match(atom.args, fact, {})
            if matched is not None:
                rows[fact] = matched
    else:
        for env in envs:
            rows.setdefault(tuple(sorted(env.items(), key=lambda kv: kv[0])), env)
    return rows


def evaluate(program: Program, extra: Facts | None = None) -> Facts:
    analyzed = program.analyze()
    facts: Facts = {p: set() for p in analyzed.predicates}
    for pred, items in analyzed.facts.items():
        facts[pred].update(f for f, _ in items)
    for pred, rows in (extra or {}).items():
        facts[pred].update(rows)
    for stratum in analyzed.strata:
        for rule in stratum.rules:
            if rule.aggregates:
                facts[rule.head.predicate] |= _heads(rule, facts)
        changed = True
        while changed:
            changed = False
            for rule in stratum.rules:
                if rule.aggregates:
                    continue
                new = _heads(rule, facts) - facts[rule.head.predicate]
                if new:
                    facts[rule.head.predicate] |= new
                    changed = True
    return facts


def sorted_facts(facts: Facts) -> dict[str, list[tuple[Any, ...]]]:
    return {p: sorted(f, key=fact_sort_key) for p, f in sorted(facts.items())}
