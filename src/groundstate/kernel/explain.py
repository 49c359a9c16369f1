"""Why a fact holds: the rule that derived it and the facts that rule used, down to asserted facts.

For a derived fact, each rule that could derive it is run seeded with the fact itself (``Engine.derivations``):
the first instantiation of its body, every variable bound, is the derivation shown — negation, comparisons and
built-ins included. Nothing is evaluated beyond the facts the tree shows, so explaining a decision costs about as
much as deciding it, and it runs against the kernel's current facts (a supposed call's included).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import GroundstateError
from ..logic import (
    FUNCTIONS,
    Apply,
    Atom,
    Comparison,
    Const,
    Negation,
    Term,
    Var,
    display,
    display_fact,
    parse_atom,
    sort_facts,
)
from .kernel import Kernel


@dataclass
class Explanation:
    """Why a fact holds: the rule that derived it and the explanations of the facts it used."""

    fact: str
    how: str  # "asserted", "derived by <source:line>", "does not hold", ...
    because: list[Explanation] = field(default_factory=list)

    def render(self, indent: int = 0) -> str:
        """The derivation as an indented tree, one fact per line."""
        lines = ["  " * indent + f"{self.fact}  [{self.how}]"]
        lines += [child.render(indent + 1) for child in self.because]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The derivation as nested objects (fact, rule, because)."""
        return {"fact": self.fact, "how": self.how, "because": [c.to_json() for c in self.because]}


def explain(kernel: Kernel, text: str, depth: int = 6) -> str:
    """Why the fact ``text`` holds, rendered as a derivation tree ``depth`` levels deep (or why it does not)."""
    return why(kernel, text, depth).render()


def why(kernel: Kernel, text: str, depth: int = 6) -> Explanation:
    """The explanation of the first fact matching ``text`` (a fact, or a pattern with variables) — for a person's
    typed pattern (``kernel why``); code explains values it holds with ``why_row``, never by writing a pattern."""
    atom = parse_atom(text)
    with kernel.engine.passing():  # no index left behind for later decisions to keep up (Engine.passing)
        rows = kernel.query(text)
        if not rows:
            return Explanation(text, "does not hold")
        return _Explainer(kernel).explain(atom.predicate, rows[0], depth, set())


def why_row(kernel: Kernel, predicate: str, *leading: Any, depth: int = 6) -> Explanation:
    """The explanation of the first fact of ``predicate`` whose first columns are the values ``leading``. The values
    stay values: text from a model, a provider or a tool (newlines, quotes, ``:-``) is never parsed as a pattern."""
    with kernel.engine.passing():
        rows = kernel.match(predicate, *leading, sort=True)
        if not rows:
            shown = display_fact(predicate, tuple(leading)).removesuffix(")") + ", ...)"
            return Explanation(shown, "does not hold")
        return _Explainer(kernel).explain(predicate, rows[0], depth, set())


def fired_rules(kernel: Kernel) -> set[tuple[str, int]]:
    """(file, line) of every rule that derives at least one fact over the kernel's current facts — what a policy
    test's coverage counts. An aggregation counts when its head holds a fact."""
    fired: set[tuple[str, int]] = set()
    engine = kernel.engine
    for rule in engine.analyzed.rules:
        where = (rule.head.pos.source, rule.head.pos.line)
        if where in fired:
            continue
        facts = kernel.match(rule.head.predicate)
        if rule.transform is not None:
            if facts:
                fired.add(where)
            continue
        names = tuple(_variables(rule.body))
        if any(engine.derivations(rule, fact, names) for fact in facts):
            fired.add(where)
    return fired


def _deriving(analyzed: Any) -> dict[str, list[tuple[Any, tuple[str, ...]]]]:
    """The program's rules (not aggregations) by the predicate they derive, each with its body's variables: worked
    out once per program and kept with it (``AnalyzedProgram.deriving``, as its compiled plans are) rather than at
    every node of every explanation (a refusal is explained on the guard's path; scanning every rule at each node
    was a fifth of it)."""
    if not analyzed.deriving:
        for rule in analyzed.rules:
            if rule.transform is None:
                analyzed.deriving.setdefault(rule.head.predicate, []).append((rule, tuple(_variables(rule.body))))
    return analyzed.deriving  # type: ignore[no-any-return]


class _Explainer:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.rules = _deriving(kernel.engine.analyzed)

    def explain(self, predicate: str, fact: tuple[Any, ...], depth: int, seen: set[str]) -> Explanation:
        shown = display_fact(predicate, fact)
        if fact in self.kernel.engine.base.get(predicate, ()):
            return Explanation(shown, "asserted")
        if shown in seen or depth <= 0:
            return Explanation(shown, "derived (not expanded further)")
        for rule, names in self.rules.get(predicate, ()):
            for row in self.kernel.engine.derivations(rule, fact, names)[:1]:
                binding = dict(zip(names, row, strict=True))
                where = f"{rule.head.pos.source}:{rule.head.pos.line}"
                node = Explanation(shown, f"derived by the rule at {where}")
                for literal in rule.body:
                    node.because.append(self._literal(literal, binding, depth - 1, seen | {shown}))
                return node
        return Explanation(shown, "derived by an aggregation or an external predicate")

    def _literal(self, literal: Any, binding: dict[str, Any], depth: int, seen: set[str]) -> Explanation:
        if isinstance(literal, Atom) and not literal.predicate.startswith(":"):
            info = self.kernel.engine.predicates.get(literal.predicate)
            if info is not None and info.external:
                return Explanation(_render(literal, binding), "external predicate")
            values = {i: _computed(a, binding) for i, a in enumerate(literal.args)}  # functions evaluated on values
            bound = {i: value for i, value in values.items() if value is not _UNKNOWN}
            rows = sort_facts(self.kernel.engine.lookup(literal.predicate, bound))
            return self.explain(literal.predicate, rows[0], depth, seen) if rows else \
                Explanation(_render(literal, binding), "?")  # fmt: skip
        if isinstance(literal, Negation):
            return Explanation("!" + _render(literal.atom, binding), "no such fact")
        if isinstance(literal, Comparison):
            text = f"{_term(literal.left, binding)} {literal.op} {_term(literal.right, binding)}"
            return Explanation(text, "holds")
        return Explanation(_render(literal, binding), "built-in holds")


def _variables(body: tuple[Any, ...]) -> list[str]:
    names: list[str] = []

    def visit(term: Any) -> None:
        if isinstance(term, Var):
            if term.name != "_" and term.name not in names:
                names.append(term.name)
        elif hasattr(term, "args"):
            for arg in term.args:
                visit(arg)

    for literal in body:
        if isinstance(literal, Atom):
            visit(literal)
        elif isinstance(literal, Comparison):
            visit(literal.left)
            visit(literal.right)
    return names


_UNKNOWN = object()  # a term whose value the binding does not give


def _computed(term: Term, binding: dict[str, Any]) -> Any:
    """The term's value from the binding — a constant, a bound variable, or a function of those evaluated here on
    values, never rendered and parsed back — or _UNKNOWN (an unbound variable, an unknown function or one that fails
    on these values)."""
    if isinstance(term, Var):
        return binding.get(term.name, _UNKNOWN)
    if isinstance(term, Const):
        return term.value
    if not isinstance(term, Apply) or term.function not in FUNCTIONS:
        return _UNKNOWN
    args = [_computed(arg, binding) for arg in term.args]
    if any(arg is _UNKNOWN for arg in args):
        return _UNKNOWN
    try:
        return FUNCTIONS[term.function](*args)
    except (GroundstateError, TypeError, ValueError, ArithmeticError):
        return _UNKNOWN




def _term(term: Term, binding: dict[str, Any]) -> str:
    if isinstance(term, Var):
        return display(binding[term.name]) if term.name in binding else term.name
    if isinstance(term, Const):
        return display(term.value)
    return f"{term.function}({', '.join(_term(a, binding) for a in term.args)})"


def _render(atom: Atom, binding: dict[str, Any]) -> str:
    return f"{atom.predicate}({', '.join(_term(a, binding) for a in atom.args)})"
