"""Why a fact holds: the rule that derived it and the facts that rule used, down to asserted facts.

Each rule body gets a *witness* rule whose head lists every body variable; evaluating the witnesses once over
the kernel's facts (in a separate engine, so the kernel is untouched) yields, for a derived fact, a complete
instantiation of a rule body that derives it — negation, comparisons and built-ins included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..logic import (
    Atom,
    Clause,
    Comparison,
    Const,
    Engine,
    Negation,
    Program,
    SourceUnit,
    Term,
    Var,
    display,
    display_fact,
    parse_atom,
)
from .kernel import Kernel

WITNESS = "explain_witness_"


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
    """The explanation of the first fact matching ``text`` (a fact, or a pattern with variables)."""
    atom = parse_atom(text)
    rows = kernel.query(text)
    if not rows:
        return Explanation(text, "does not hold")
    return _Explainer(kernel).explain(atom.predicate, rows[0], depth, set())


class _Explainer:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.rules = [r for r in kernel.engine.analyzed.rules if r.transform is None]
        self._witnesses: Engine | None = None

    def witnesses(self) -> Engine:
        if self._witnesses is None:
            clauses = [
                Clause(Atom(f"{WITNESS}{r.index}", tuple(Var(n, r.head.pos) for n in _variables(r.body)), r.head.pos),
                       r.body, None, r.head.pos)
                for r in self.rules
            ]  # fmt: skip
            program = self.kernel.program + Program([SourceUnit("<explain>", clauses=clauses)])
            engine = Engine(program, externals=self.kernel._externals, check_bounds=False)
            for predicate, facts in self.kernel.engine.base.items():
                engine.assert_facts(predicate, [f for f in facts if f not in engine.base[predicate]])
            engine.evaluate()
            self._witnesses = engine
        return self._witnesses

    def explain(self, predicate: str, fact: tuple[Any, ...], depth: int, seen: set[str]) -> Explanation:
        shown = display_fact(predicate, fact)
        if fact in self.kernel.engine.base.get(predicate, ()):
            return Explanation(shown, "asserted")
        if shown in seen or depth <= 0:
            return Explanation(shown, "derived (not expanded further)")
        for rule in (r for r in self.rules if r.head.predicate == predicate):
            names = _variables(rule.body)
            for row in self.witnesses().facts(f"{WITNESS}{rule.index}"):
                binding = dict(zip(names, row, strict=True))
                if tuple(_value(arg, binding) for arg in rule.head.args) != fact:
                    continue
                where = f"{rule.head.pos.source}:{rule.head.pos.line}"
                node = Explanation(shown, f"derived by the rule at {where}")
                for literal in rule.body:
                    node.because.append(self._literal(literal, binding, depth - 1, seen | {shown}))
                return node
        return Explanation(shown, "derived by an aggregation or an external predicate")

    def _literal(self, literal: Any, binding: dict[str, Any], depth: int, seen: set[str]) -> Explanation:
        if isinstance(literal, Atom) and not literal.predicate.startswith(":"):
            pattern = _render(literal, binding)
            info = self.kernel.engine.predicates.get(literal.predicate)
            if info is not None and info.external:
                return Explanation(pattern, "external predicate")
            rows = self.kernel.query(pattern)
            return self.explain(literal.predicate, rows[0], depth, seen) if rows else Explanation(pattern, "?")
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


def _value(term: Term, binding: dict[str, Any]) -> Any:
    if isinstance(term, Var):
        return binding[term.name]
    if isinstance(term, Const):
        return term.value
    return None


def _term(term: Term, binding: dict[str, Any]) -> str:
    if isinstance(term, Var):
        return display(binding[term.name]) if term.name in binding else term.name
    if isinstance(term, Const):
        return display(term.value)
    return f"{term.function}({', '.join(_term(a, binding) for a in term.args)})"


def _render(atom: Atom, binding: dict[str, Any]) -> str:
    return f"{atom.predicate}({', '.join(_term(a, binding) for a in atom.args)})"
