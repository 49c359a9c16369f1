"""The mistakes people make in Datalog, found before a rule decides anything: a linter over the user's rule files,
read with the shipped policy they join (whose own rules are context, never reported).

- ``singleton-variable`` (warning): a named variable that occurs once in its clause — a typo, or a ``_`` meant;
- ``unused-declaration`` (warning): a predicate your files declare that no clause, fact or rule uses;
- ``never-derived`` (error): a predicate your files declare and use in a rule body, which nothing derives or asserts
  (no rule, no fact; groundstate reports only the shipped policy's inputs) — every rule that needs it is dead;
- ``never-fires`` (warning): a rule whose body needs a predicate nothing can make true, directly or through rules
  that themselves cannot fire;
- ``duplicate-rule`` (warning): a clause that repeats an earlier one of your files, up to the names of its
  variables;
- ``shadows-shipped`` (warning): a clause that repeats a shipped rule (it adds nothing and hides that the shipped
  policy already says it); (error) a clause that adds rows to a predicate the shipped policy computes in one piece
  with an aggregate (``|> do fn:group_by``) — a second row breaks the one decision the policy derives there.

Each finding names ``file:line:col`` as the analysis errors do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .ast import Apply, Atom, Clause, Comparison, Const, Negation, SourceUnit, Term, Transform, Var
from .errors import Position

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class LintFinding:
    """One finding: how bad, which check, what is wrong, and where."""

    level: str
    code: str
    message: str
    pos: Position

    def __str__(self) -> str:
        return f"{self.pos}: {self.level}: {self.code}: {self.message}"


def lint_units(units: list[SourceUnit], shipped: int = 0) -> list[LintFinding]:
    """Every finding about ``units[shipped:]`` (the user's files), read with ``units[:shipped]`` (the shipped
    policy); in the order of the files and their lines."""
    mine = units[shipped:]
    findings = [*_singletons(mine), *_declarations(units, shipped), *_dead_rules(units, shipped),
                *_repeats(units, shipped)]  # fmt: skip
    return sorted(findings, key=lambda f: (units.index(_unit_of(units, f.pos.source)), f.pos.line, f.pos.column))


def _unit_of(units: list[SourceUnit], source: str) -> SourceUnit:
    return next((unit for unit in units if unit.source == source), units[-1])


def _rules(units: Iterable[SourceUnit]) -> Iterator[Clause]:
    for unit in units:
        yield from unit.clauses


def _atoms(clause: Clause) -> Iterator[tuple[Atom, bool]]:
    """Each body atom of the clause that names a predicate (not a built-in such as ``:string:contains``), with
    whether it is positive."""
    for literal in clause.body:
        if isinstance(literal, Atom) and not literal.predicate.startswith(":"):
            yield literal, True
        elif isinstance(literal, Negation) and not literal.atom.predicate.startswith(":"):
            yield literal.atom, False


# -- singleton variables ------------------------------------------------------------------------------------------
def _vars(term: Term | Atom | Transform | Comparison | Negation) -> Iterator[Var]:
    if isinstance(term, Var):
        yield term
    elif isinstance(term, Apply | Atom):
        for arg in term.args:
            yield from _vars(arg)
    elif isinstance(term, Negation):
        yield from _vars(term.atom)
    elif isinstance(term, Comparison):
        yield from _vars(term.left)
        yield from _vars(term.right)
    elif isinstance(term, Transform):
        yield from term.group_by or ()
        for let in term.lets:
            yield let.var
            yield from _vars(let.expr)


def _clause_vars(clause: Clause) -> list[Var]:
    found = [*_vars(clause.head)]
    for literal in clause.body:
        found += _vars(literal)
    if clause.transform is not None:
        found += _vars(clause.transform)
    return found


def _singletons(units: list[SourceUnit]) -> Iterator[LintFinding]:
    for clause in _rules(units):
        occurrences: dict[str, list[Var]] = {}
        for var in _clause_vars(clause):
            occurrences.setdefault(var.name, []).append(var)
        for name, seen in occurrences.items():
            if len(seen) == 1 and not name.startswith("_"):
                yield LintFinding(WARNING, "singleton-variable", f"{name} occurs once in this clause: a typo, or "
                                  f"write _ (or _{name}) for a value you do not need", seen[0].pos)  # fmt: skip


# -- declarations nothing uses or derives ---------------------------------------------------------------------------
def _declarations(units: list[SourceUnit], shipped: int) -> Iterator[LintFinding]:
    heads = {clause.head.predicate for clause in _rules(units)}
    bodies = {atom.predicate for clause in _rules(units) for atom, _ in _atoms(clause)}
    facts = {row.predicate for unit in units for row in unit.ground}
    for unit in units[shipped:]:
        for decl in unit.decls:
            name = decl.atom.predicate
            if name not in heads | bodies | facts:
                yield LintFinding(WARNING, "unused-declaration", f"{name} is declared but no clause, fact or rule "
                                  "uses it", decl.pos)  # fmt: skip
            elif name in bodies and name not in heads | facts:
                yield LintFinding(ERROR, "never-derived", f"{name} is used in a rule body but nothing derives or "
                                  "asserts it (groundstate reports only the shipped policy's inputs): every rule "
                                  "that needs it is dead", decl.pos)  # fmt: skip


# -- rules that can never fire --------------------------------------------------------------------------------------
def _dead_rules(units: list[SourceUnit], shipped: int) -> Iterator[LintFinding]:
    """Derivable predicates, to a fixpoint: the shipped policy's inputs (declared there, derived by no rule: what
    groundstate reports), facts, and heads of rules whose positive body atoms are all derivable."""
    rules = [clause for clause in _rules(units) if not clause.is_fact]
    derived_somewhere = {clause.head.predicate for clause in rules}
    inputs = {decl.atom.predicate for unit in units[:shipped] for decl in unit.decls} - derived_somewhere
    derivable = inputs | {row.predicate for unit in units for row in unit.ground}
    derivable |= {clause.head.predicate for clause in _rules(units) if clause.is_fact}
    changed = True
    while changed:
        changed = False
        for clause in rules:
            if clause.head.predicate not in derivable and all(
                atom.predicate in derivable for atom, positive in _atoms(clause) if positive
            ):
                derivable.add(clause.head.predicate)
                changed = True
    asserted = derived_somewhere | {row.predicate for unit in units for row in unit.ground}
    never = {decl.atom.predicate for unit in units[shipped:] for decl in unit.decls} - asserted
    for clause in _rules(units[shipped:]):
        missing = [atom for atom, positive in _atoms(clause) if positive and atom.predicate not in derivable]
        if missing and not any(atom.predicate in never for atom in missing):  # never-derived says it at the Decl
            yield LintFinding(WARNING, "never-fires", f"this rule for {clause.head.predicate} needs "
                              f"{missing[0].predicate}, which nothing can make true", clause.pos)  # fmt: skip


# -- repeated rules -------------------------------------------------------------------------------------------------
def canonical(clause: Clause) -> str:
    """The clause as text with its variables renamed in order of first occurrence (``_`` kept): two clauses that
    differ only in their variables' names read the same."""
    names: dict[str, str] = {}

    def term(value: Term) -> str:
        if isinstance(value, Var):
            if value.name == "_":
                return "_"
            return names.setdefault(value.name, f"V{len(names)}")
        if isinstance(value, Const):
            return repr(value.value)
        return f"{value.function}({', '.join(term(arg) for arg in value.args)})"

    def atom(value: Atom) -> str:
        return f"{value.predicate}({', '.join(term(arg) for arg in value.args)})"

    parts = [atom(clause.head)]
    for literal in clause.body:
        if isinstance(literal, Atom):
            parts.append(atom(literal))
        elif isinstance(literal, Negation):
            parts.append("!" + atom(literal.atom))
        else:
            parts.append(f"{term(literal.left)} {literal.op} {term(literal.right)}")
    if clause.transform is not None:
        lets = [f"{term(let.var)}={term(let.expr)}" for let in clause.transform.lets]
        group = clause.transform.group_by
        parts.append(f"|> {[term(v) for v in group] if group is not None else None} {lets}")
    return " ; ".join(parts)


def _repeats(units: list[SourceUnit], shipped: int) -> Iterator[LintFinding]:
    seen: dict[str, Clause] = {}
    aggregated: dict[str, Clause] = {}
    for clause in _rules(units[:shipped]):
        seen.setdefault(canonical(clause), clause)
        if clause.transform is not None and clause.transform.group_by is not None:
            aggregated.setdefault(clause.head.predicate, clause)
    shipped_text = set(seen)
    for clause in _rules(units[shipped:]):
        text = canonical(clause)
        earlier = seen.get(text)
        where = f"{earlier.pos.source}:{earlier.pos.line}" if earlier is not None else ""
        if earlier is not None and text in shipped_text:
            yield LintFinding(WARNING, "shadows-shipped", f"repeats the shipped rule at {where}: it adds nothing",
                              clause.pos)  # fmt: skip
        elif earlier is not None:
            yield LintFinding(WARNING, "duplicate-rule", f"repeats the clause at {where}", clause.pos)
        else:
            seen[text] = clause
        piece = aggregated.get(clause.head.predicate)
        if piece is not None and earlier is None:
            yield LintFinding(ERROR, "shadows-shipped", f"adds to {clause.head.predicate}, which the shipped policy "
                              f"computes in one piece at {piece.pos.source}:{piece.pos.line}: a second row breaks "
                              "its one decision (add to the extension points it reads)", clause.pos)  # fmt: skip
