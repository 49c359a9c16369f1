"""Static analysis: declarations, arities, undefined predicates, safety, transforms, stratification.

Every problem found is collected with its position; the program is accepted only when none is found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import fundeps, type_bounds
from .ast import (
    Apply,
    Atom,
    Clause,
    Comparison,
    Const,
    Decl,
    FactRow,
    Let,
    Literal,
    Negation,
    SourceUnit,
    Term,
    Transform,
    Var,
)
from .builtins import ARITY, FUNCTIONS, PREDICATES, REDUCERS, BuiltinError
from .errors import AnalysisError, Diagnostic, Position
from .values import display_fact

LIST_REDUCERS = {"fn:sum", "fn:max", "fn:min"}  # also plain functions on a list


@dataclass
class PredicateInfo:
    """What the analysis knows about a predicate: arity, declaration, documentation and modes."""

    name: str
    arity: int
    decl: Decl | None = None
    modes: tuple[str, ...] | None = None  # for external predicates: "+" input, "-" output
    doc: str = ""
    fundeps: tuple[fundeps.FunDep, ...] = ()  # what the Decl's fundep(...) descriptors say (see fundeps.py)

    @property
    def external(self) -> bool:
        """Whether the predicate is answered by Python (declared ``external``) rather than by facts."""
        return self.modes is not None


@dataclass
class Rule:
    """A clause with a body, after constant folding; ``index`` is its place in the program."""

    index: int
    clause: Clause

    @property
    def head(self) -> Atom:
        return self.clause.head

    @property
    def body(self) -> tuple[Literal, ...]:
        return self.clause.body

    @property
    def transform(self) -> Transform | None:
        return self.clause.transform

    @property
    def aggregates(self) -> bool:
        return self.clause.transform is not None and self.clause.transform.group_by is not None

    def body_predicates(self) -> list[tuple[str, bool]]:
        """(predicate, negated) for every atom of the body that reads stored facts."""
        out = []
        for lit in self.body:
            if isinstance(lit, Atom) and not lit.predicate.startswith(":"):
                out.append((lit.predicate, False))
            elif isinstance(lit, Negation):
                out.append((lit.atom.predicate, True))
        return out


@dataclass
class Stratum:
    predicates: list[str]
    rules: list[Rule]
    recursive: bool
    aggregates: bool
    number: int = -1  # its place in evaluation order (AnalyzedProgram.strata)


@dataclass
class AnalyzedProgram:
    """A checked program: its predicates, facts, numbered rules and strata in evaluation order."""

    predicates: dict[str, PredicateInfo]
    facts: dict[str, list[tuple[tuple[Any, ...], Position]]]
    rules: list[Rule]
    strata: list[Stratum]
    stratum_of: dict[str, int] = field(default_factory=dict)
    plans: dict[Any, Any] = field(default_factory=dict)  # compiled plans, shared by every engine of this program
    watched_plans: dict[Any, Any] = field(default_factory=dict)  # the same, watched (engines with a time limit)
    deriving: dict[str, Any] = field(default_factory=dict)  # its rules by head, as explanations read them (explain.py)


def _vars(term: Term) -> list[Var]:
    if isinstance(term, Var):
        return [] if term.name == "_" else [term]
    if isinstance(term, Apply):
        return [v for arg in term.args for v in _vars(arg)]
    return []


def _has_wildcard(term: Term) -> bool:
    if isinstance(term, Var):
        return term.name == "_"
    return isinstance(term, Apply) and any(_has_wildcard(a) for a in term.args)


def prefix_package(unit: SourceUnit) -> SourceUnit:
    """Rename the predicates a ``Package p!`` file defines to ``p.name``, uses of them included."""
    if unit.package is None:
        return unit
    own = {d.atom.predicate for d in unit.decls} | {c.head.predicate for c in unit.clauses}
    own |= {row.predicate for row in unit.ground}
    prefix = unit.package + "."

    def rename(atom: Atom) -> Atom:
        if atom.predicate in own:
            return Atom(prefix + atom.predicate, atom.args, atom.pos)
        return atom

    def rename_lit(lit: Literal) -> Literal:
        if isinstance(lit, Atom):
            return rename(lit)
        if isinstance(lit, Negation):
            return Negation(rename(lit.atom), lit.pos)
        return lit

    decls = [Decl(rename(d.atom), d.descriptors, d.bounds, d.pos) for d in unit.decls]
    clauses = [
        Clause(rename(c.head), tuple(rename_lit(lit) for lit in c.body), c.transform, c.pos) for c in unit.clauses
    ]
    ground = [FactRow(prefix + row.predicate, row.values, row.pos) for row in unit.ground]
    return SourceUnit(unit.source, unit.package, unit.uses, decls, clauses, ground)


def in_line_order(unit: SourceUnit) -> list[Clause | FactRow]:
    """The unit's clauses and fact rows in the order of their lines, as the full parser would have listed them (the
    analysis reports problems, and keeps facts and predicates, in that order)."""
    if not unit.ground:
        return list(unit.clauses)
    if not unit.clauses:
        return list(unit.ground)
    return sorted([*unit.clauses, *unit.ground], key=lambda item: item.pos.line)  # stable: runs already in order


class Analyzer:
    def __init__(self, units: list[SourceUnit], check_bounds: bool = True) -> None:
        self.units = [prefix_package(u) for u in units]
        self.check_bounds = check_bounds
        self.malformed_bounds: set[str] = set()  # predicates whose Decl has a bound that is not a type (reported)
        self.diagnostics: list[Diagnostic] = []
        self.predicates: dict[str, PredicateInfo] = {}
        self.defined: set[str] = set()

    def error(self, pos: Position | None, message: str) -> None:
        self.diagnostics.append(Diagnostic(pos, message))

    # -- entry ---------------------------------------------------------------------------------
    def run(self) -> AnalyzedProgram:
        self.check_package_visibility()
        decls = [d for u in self.units for d in u.decls]
        clauses = [c for u in self.units for c in in_line_order(u)]
        for decl in decls:
            self.declare(decl)
        folded: list[Clause | FactRow] = []
        for clause in clauses:
            result = clause if isinstance(clause, FactRow) else self.fold_clause(clause)  # a row is constants already
            if result is not None:
                folded.append(result)
        for clause in folded:
            if isinstance(clause, FactRow):
                self.note(clause.predicate, len(clause.values), clause.pos, defining=True)
                self.defined.add(clause.predicate)
            else:
                self.note_arity(clause.head, defining=True)
                self.defined.add(clause.head.predicate)
        facts, rules = self.split_clauses(folded)
        strata = self.stratify(rules) if not self.diagnostics else []
        if self.diagnostics:
            raise AnalysisError(self.diagnostics)
        program = AnalyzedProgram(self.predicates, facts, rules, strata)
        for i, stratum in enumerate(strata):
            stratum.number = i
            for pred in stratum.predicates:
                program.stratum_of[pred] = i
        return program

    def split_clauses(
        self, folded: list[Clause | FactRow]
    ) -> tuple[dict[str, list[tuple[tuple[Any, ...], Position]]], list[Rule]]:
        """Facts (checked, by predicate, with where each was written) and rules (checked, numbered)."""
        facts: dict[str, list[tuple[tuple[Any, ...], Position]]] = {}
        rules: list[Rule] = []
        for clause in folded:
            if isinstance(clause, FactRow):
                self.check_bounds_of(clause.predicate, clause.values, clause.pos)
                facts.setdefault(clause.predicate, []).append((clause.values, clause.pos))
            elif clause.is_fact:
                fact = self.check_fact(clause)
                if fact is not None:
                    facts.setdefault(clause.head.predicate, []).append((fact, clause.pos))
            else:
                rules.append(Rule(len(rules), clause))
                self.check_rule(clause)
        for pred in facts:
            info = self.predicates.get(pred)
            if info is not None and info.external:
                self.error(facts[pred][0][1], f"external predicate {pred} cannot have facts")
        return facts, rules

    def check_package_visibility(self) -> None:
        """A predicate of another package ``q`` may be named (``q.x``) only by a file that says ``Use q!``."""
        packages = {u.package for u in self.units if u.package is not None}
        for unit in self.units:
            visible = {unit.package, *unit.uses}
            for clause in unit.clauses:
                for lit in clause.body:
                    atom = lit.atom if isinstance(lit, Negation) else lit
                    if not isinstance(atom, Atom) or "." not in atom.predicate:
                        continue
                    owner = atom.predicate.rsplit(".", 1)[0]
                    if owner in packages and owner not in visible:
                        self.error(
                            atom.pos, f"{atom.predicate} belongs to package {owner}; add 'Use {owner}!' to this file"
                        )

    # -- declarations --------------------------------------------------------------------------
    def declare(self, decl: Decl) -> None:
        atom = decl.atom
        name = atom.predicate
        if name.startswith(":"):
            self.error(atom.pos, f"cannot declare built-in predicate {name}")
            return
        previous = self.predicates.get(name)
        if previous is not None and previous.decl is not None:
            self.error(atom.pos, f"predicate {name} is declared more than once (first at {previous.decl.pos})")
            return
        self._check_decl_arguments(name, atom)
        info = PredicateInfo(name, len(atom.args), decl)
        doc = decl.descriptor("doc")
        if doc is not None and doc.args and isinstance(doc.args[0], Const):
            info.doc = str(doc.args[0].value)
        if decl.descriptor("external") is not None:
            self._declare_modes(decl, info)
        info.fundeps = fundeps.declared(decl, self.error)
        self._check_bounds(decl, info)
        self.predicates[name] = info

    def _check_decl_arguments(self, name: str, atom: Atom) -> None:
        seen: set[str] = set()
        for arg in atom.args:
            if not isinstance(arg, Var) or arg.name == "_":
                self.error(getattr(arg, "pos", atom.pos), f"Decl {name}: arguments must be distinct variables")
            elif arg.name in seen:
                self.error(arg.pos, f"Decl {name}: variable {arg.name} appears twice")
            else:
                seen.add(arg.name)

    def _declare_modes(self, decl: Decl, info: PredicateInfo) -> None:
        """An external predicate's mode(...): one "+" or "-" per argument."""
        mode = decl.descriptor("mode")
        if mode is None:
            self.error(decl.pos, f'external predicate {info.name} needs a mode(...) descriptor, e.g. mode("+", "-")')
            return
        modes = tuple(a.value if isinstance(a, Const) else None for a in mode.args)
        if len(modes) != info.arity or any(m not in ("+", "-") for m in modes):
            self.error(mode.pos, f'mode of {info.name} must give "+" or "-" for each of its {info.arity} arguments')
        else:
            info.modes = modes  # type: ignore[assignment]

    def _check_bounds(self, decl: Decl, info: PredicateInfo) -> None:
        """Each bound block lists one well-formed type per argument."""
        for block in decl.bounds:
            if len(block) != info.arity:
                pos = block[0].pos if block else decl.pos
                self.error(
                    pos, f"bound for {info.name} lists {len(block)} types but {info.name} has {info.arity} arguments"
                )
                self.malformed_bounds.add(info.name)  # a fact of another arity would be judged by it (fuzzing)
                continue
            for term in block:
                problem = type_bounds.type_problem(term)
                if problem:
                    self.error(term.pos, f"in bound of {info.name}: {problem}")
                    self.malformed_bounds.add(info.name)

    def note_arity(self, atom: Atom, defining: bool = False) -> bool:
        """Whether the atom's arity is its predicate's (the first definition sets it); reported when not."""
        return self.note(atom.predicate, len(atom.args), atom.pos, defining)

    def note(self, predicate: str, arity: int, pos: Position, defining: bool = False) -> bool:
        """``note_arity`` for a predicate used with ``arity`` arguments at ``pos``."""
        info = self.predicates.get(predicate)
        if info is None:
            if not defining:
                return True
            self.predicates[predicate] = PredicateInfo(predicate, arity)
            return True
        if info.arity != arity:
            where = f" (declared at {info.decl.pos})" if info.decl else ""
            self.error(pos, f"{predicate} has {info.arity} arguments{where} but is used here with {arity}")
            return False
        return True

    # -- constant folding ----------------------------------------------------------------------
    def fold(self, term: Term, allow_reducer: bool = False) -> Term | None:
        """Evaluate function applications whose arguments are all constants; None after an error."""
        if not isinstance(term, Apply):
            return term
        fn = term.function
        args = []
        for arg in term.args:
            folded = self.fold(arg)
            if folded is None:
                return None
            args.append(folded)
        if fn in REDUCERS and fn not in LIST_REDUCERS:
            if not allow_reducer:
                self.error(term.pos, f"reducer {fn} can only be used in a let after do fn:group_by(...)")
                return None
            return Apply(fn, tuple(args), term.pos)
        if fn not in FUNCTIONS:
            hint = " (fn:group_by goes after '|> do')" if fn == "fn:group_by" else ""
            self.error(term.pos, f"unknown function {fn}{hint}")
            return None
        low, high = ARITY[fn]
        if len(args) < low or (high is not None and len(args) > high):
            expected = f"{low}" if low == high else f"at least {low}" if high is None else f"{low} to {high}"
            self.error(term.pos, f"{fn} takes {expected} arguments, got {len(args)}")
            return None
        if all(isinstance(a, Const) for a in args):
            try:
                value = FUNCTIONS[fn](*(a.value for a in args))  # type: ignore[union-attr]
            except BuiltinError as exc:
                self.error(term.pos, str(exc))
                return None
            return Const(value, term.pos)
        return Apply(fn, tuple(args), term.pos)

    def fold_atom(self, atom: Atom) -> Atom | None:
        if all(type(arg) is not Apply for arg in atom.args):
            return atom
        args = []
        for arg in atom.args:
            folded = self.fold(arg)
            if folded is None:
                return None
            args.append(folded)
        return Atom(atom.predicate, tuple(args), atom.pos)

    def fold_clause(self, clause: Clause) -> Clause | None:
        """The clause with constant applications evaluated; None if any of them was an error (each reported)."""
        if clause.is_fact:
            head = self.fold_atom(clause.head)
            return None if head is None else clause if head is clause.head else Clause(head, (), None, clause.pos)
        head = self.fold_atom(clause.head)
        body = [self.fold_literal(lit) for lit in clause.body]
        transform = clause.transform
        lets: list[Let | None] = []
        if transform is not None:
            lets = [self.fold_let(let, transform.group_by is not None) for let in transform.lets]
            transform = Transform(transform.group_by, tuple(let for let in lets if let is not None), transform.pos)
        if head is None or None in body or None in lets:
            return None
        return Clause(head, tuple(lit for lit in body if lit is not None), transform, clause.pos)

    def fold_literal(self, lit: Literal) -> Literal | None:
        """One body literal folded; None after an error."""
        if isinstance(lit, Atom):
            return self.fold_atom(lit)
        if isinstance(lit, Negation):
            folded_atom = self.fold_atom(lit.atom)
            return None if folded_atom is None else Negation(folded_atom, lit.pos)
        left, right = self.fold(lit.left), self.fold(lit.right)
        return None if left is None or right is None else Comparison(lit.op, left, right, lit.pos)

    def fold_let(self, let: Let, grouped: bool) -> Let | None:
        """One let folded (reducers allowed after a group-by); a constant let stays a function of nothing."""
        expr = self.fold(let.expr, allow_reducer=grouped)
        if expr is None:
            return None
        if isinstance(expr, Const):
            expr = Apply("fn:tuple", (expr,), expr.pos)
        assert isinstance(expr, Apply)
        return Let(let.var, expr, let.pos)

    # -- facts and rules -----------------------------------------------------------------------
    def check_fact(self, clause: Clause) -> tuple[Any, ...] | None:
        head = clause.head
        if head.predicate.startswith(":"):
            self.error(head.pos, f"cannot define built-in predicate {head.predicate}")
            return None
        values = []
        for arg in head.args:
            if isinstance(arg, Var):
                self.error(
                    arg.pos,
                    f"variable {arg.name} in fact {head.predicate} is not bound: a fact must be ground"
                    if arg.name != "_"
                    else f"wildcard _ in fact {head.predicate}: a fact must be ground",
                )
                return None
            if not isinstance(arg, Const):
                self.error(arg.pos, f"fact {head.predicate} contains {arg}, which is not a constant")
                return None
            values.append(arg.value)
        fact = tuple(values)
        self.check_bounds_of(head.predicate, fact, head.pos)
        return fact

    def check_bounds_of(self, predicate: str, fact: tuple[Any, ...], pos: Position) -> None:
        """Report a fact whose values are outside its predicate's declared bounds (when bounds are checked)."""
        info = self.predicates.get(predicate)
        if self.check_bounds and info is not None and info.decl is not None and info.decl.bounds:
            if predicate in self.malformed_bounds:  # reported at the Decl (found by fuzzing: a fact judged by
                return  # ``bound [/number, Anumber]`` failed an assertion); a fact is not judged by them
            problem = bounds_problem(info, fact)
            if problem:
                self.error(pos, problem)

    def check_rule(self, clause: Clause) -> None:
        head = clause.head
        if head.predicate.startswith(":"):
            self.error(head.pos, f"cannot define built-in predicate {head.predicate}")
            return
        info = self.predicates.get(head.predicate)
        if info is not None and info.decl is not None and info.decl.descriptor("extensional") is not None:
            self.error(head.pos, f"{head.predicate} is declared extensional() but is defined by a rule")
        if info is not None and info.external:
            self.error(head.pos, f"external predicate {head.predicate} cannot be defined by a rule")
        for arg in head.args:
            if isinstance(arg, Var) and arg.name == "_":
                self.error(arg.pos, f"wildcard _ in the head of {head.predicate}")
            elif isinstance(arg, Apply):
                self.error(
                    arg.pos,
                    f"function application {arg} in the head of {head.predicate}: compute it with"
                    " '|> let V = ...' or 'V = ...' in the body",
                )
        bound = self.check_body(clause)
        self.check_transform(clause, bound)

    def check_body(self, clause: Clause) -> set[str]:
        bound: set[str] = set()
        negations: list[Negation] = []
        for lit in clause.body:
            if isinstance(lit, Negation):
                negations.append(lit)
                self.check_atom_reference(lit.atom, negated=True)
                for arg in lit.atom.args:
                    if isinstance(arg, Apply):
                        self.error(arg.pos, f"function application {arg} in a negated atom; bind it first with =")
            elif isinstance(lit, Atom):
                self.check_atom_literal(lit, bound)
            else:
                self.check_comparison(lit, bound)
        for neg in negations:
            for arg in neg.atom.args:
                for var in _vars(arg):
                    if var.name not in bound:
                        self.error(
                            var.pos,
                            f"variable {var.name} in {neg} is not bound by a positive subgoal (use _ for 'any value')",
                        )
        return bound

    def unbound_error(self, var: Var, lit: object) -> None:
        self.error(var.pos, f"variable {var.name} in {lit} will not have a value yet; move the subgoal to the right")

    def check_atom_reference(self, atom: Atom, negated: bool) -> bool:
        name = atom.predicate
        if name.startswith(":"):
            if negated:
                self.error(atom.pos, f"built-in predicate {name} cannot be negated")
                return False
            builtin = PREDICATES.get(name)
            if builtin is None:
                self.error(atom.pos, f"could not find predicate {name} (no such built-in predicate)")
                return False
            if builtin.arity != len(atom.args):
                self.error(atom.pos, f"{name} takes {builtin.arity} arguments, got {len(atom.args)}")
                return False
            return True
        if name not in self.predicates and name not in self.defined:
            self.error(atom.pos, f"could not find predicate {name}/{len(atom.args)}")
            return False
        info = self.predicates.get(name)
        if info is not None and info.external and negated:
            self.error(atom.pos, f"external predicate {name} cannot be negated")
            return False
        return self.note_arity(atom)

    def check_atom_literal(self, atom: Atom, bound: set[str]) -> None:
        """An atom in a body: its input arguments must be bound before it; it binds its plain variables."""
        if not self.check_atom_reference(atom, negated=False):
            bound.update(v.name for arg in atom.args for v in _vars(arg))  # one error, not a cascade
            return
        inputs = self._input_positions(atom)
        for i in inputs:
            for var in _vars(atom.args[i]):
                if var.name not in bound:
                    self.unbound_error(var, atom)
            if _has_wildcard(atom.args[i]):
                self.error(atom.args[i].pos, f"wildcard _ as input argument {i + 1} of {atom.predicate}")
        for i, arg in enumerate(atom.args):
            if i not in inputs and isinstance(arg, Apply):
                for var in _vars(arg):
                    if var.name not in bound:
                        self.unbound_error(var, atom)
        bound.update(arg.name for arg in atom.args if isinstance(arg, Var) and arg.name != "_")

    def _input_positions(self, atom: Atom) -> tuple[int, ...]:
        """Which arguments must be bound: a built-in's inputs, a declared mode's '+', none otherwise (where a
        function application cannot stand as an argument)."""
        info = self.predicates.get(atom.predicate)
        if atom.predicate.startswith(":"):
            return PREDICATES[atom.predicate].inputs
        if info is not None and info.modes is not None:
            return tuple(i for i, m in enumerate(info.modes) if m == "+")
        for arg in atom.args:
            if isinstance(arg, Apply):
                self.error(
                    arg.pos, f"function application {arg} as an argument of {atom.predicate}; bind it first with ="
                )
        return ()

    def check_comparison(self, lit: Comparison, bound: set[str]) -> None:
        for side in (lit.left, lit.right):
            if _has_wildcard(side):
                self.error(side.pos, f"wildcard _ in comparison {lit}")
                return
        left_free = [v for v in _vars(lit.left) if v.name not in bound]
        right_free = [v for v in _vars(lit.right) if v.name not in bound]
        if lit.op == "=":
            if isinstance(lit.left, Var) and left_free and not right_free:
                bound.add(lit.left.name)
                return
            if isinstance(lit.right, Var) and right_free and not left_free:
                bound.add(lit.right.name)
                return
        for var in left_free + right_free:
            self.unbound_error(var, lit)
            return

    def check_transform(self, clause: Clause, bound: set[str]) -> None:
        """The head's variables are bound by the body, or (under a transform) grouped or defined by a let."""
        transform = clause.transform
        head_vars = [v for arg in clause.head.args for v in _vars(arg)]
        if transform is None:
            for var in head_vars:
                if var.name not in bound:
                    self.error(
                        var.pos, f"variable {var.name} in the head of {clause.head.predicate} is not bound by the body"
                    )
            return
        available = self._group_scope(transform, bound)
        defined: set[str] = set()
        for let in transform.lets:
            self._check_let(let, transform, bound, available | defined, defined)
            defined.add(let.var.name)
        for var in head_vars:
            if var.name not in available and var.name not in defined:
                what = "grouped by fn:group_by or defined by a let" if transform.group_by is not None else "bound"
                self.error(var.pos, f"variable {var.name} in the head of {clause.head.predicate} is not {what}")

    def _group_scope(self, transform: Transform, bound: set[str]) -> set[str]:
        """The variables a transform's lets may use: the group-by list (each once, each bound), or all bound."""
        if transform.group_by is None:
            return set(bound)
        available: set[str] = set()
        for var in transform.group_by:
            if var.name in available:
                self.error(var.pos, f"fn:group_by lists {var.name} twice")
            elif var.name not in bound:
                self.error(var.pos, f"group-by variable {var.name} is not bound by the body")
            available.add(var.name)
        return available

    def _check_let(self, let: Let, transform: Transform, bound: set[str], scope: set[str], defined: set[str]) -> None:
        """One let: a new name; a reducer's arity and body variables, or a function over the scope so far."""
        name = let.var.name
        if name in bound or name in defined:
            self.error(let.var.pos, f"let {name} redefines variable {name}; choose a new name")
        is_reducer = let.expr.function in REDUCERS and transform.group_by is not None
        if is_reducer:
            (low, high), _ = REDUCERS[let.expr.function]
            count = len(let.expr.args)
            if count < low or (high is not None and count > high):
                self.error(
                    let.expr.pos, f"reducer {let.expr.function} takes {low}{'' if high == low else '+'} arguments"
                )
            scope = bound
        for var in _vars(let.expr):
            if var.name not in scope:
                where = "the body" if is_reducer else "group-by variables and earlier lets"
                self.error(var.pos, f"variable {var.name} in {let} is not bound by {where}")
        if _has_wildcard(let.expr):
            self.error(let.expr.pos, f"wildcard _ in {let}")

    # -- stratification ------------------------------------------------------------------------
    def stratify(self, rules: list[Rule]) -> list[Stratum]:
        preds = sorted(self.predicates)
        edges: dict[str, list[tuple[str, bool, Position]]] = {p: [] for p in preds}
        for rule in rules:
            head = rule.head.predicate
            for lit in rule.body:
                if isinstance(lit, Atom) and not lit.predicate.startswith(":"):
                    edges[head].append((lit.predicate, rule.aggregates, lit.pos))
                elif isinstance(lit, Negation):
                    edges[head].append((lit.atom.predicate, True, lit.pos))
        components = strongly_connected(preds, {p: [e[0] for e in es] for p, es in edges.items()})
        component_of = {p: i for i, comp in enumerate(components) for p in comp}
        for pred in preds:
            for target, negative, pos in edges[pred]:
                if negative and component_of[target] == component_of[pred]:
                    self.error(
                        pos,
                        f"program cannot be stratified: {pred} depends on {target} through negation or"
                        " aggregation inside a recursive cycle",
                    )
        rules_of: dict[int, list[Rule]] = {}
        for rule in rules:
            rules_of.setdefault(component_of[rule.head.predicate], []).append(rule)
        strata = []
        for i, comp in enumerate(components):
            members = set(comp)
            comp_rules = rules_of.get(i, [])
            recursive = any(pred in members for r in comp_rules for pred, _ in r.body_predicates())
            strata.append(Stratum(sorted(comp), comp_rules, recursive, any(r.aggregates for r in comp_rules)))
        return strata


def strongly_connected(nodes: list[str], succ: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm without recursion; components come out dependencies first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ.get(child, ()))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                out.append(comp)
    return out


def bounds_problem(info: PredicateInfo, fact: tuple[Any, ...]) -> str | None:
    """Why ``fact`` violates the declared type bounds of its predicate, or None."""
    assert info.decl is not None
    bounds = info.decl.bounds
    if not bounds or any(len(b) != len(fact) for b in bounds):
        return None
    for block in bounds:
        if all(type_bounds.matches(t, v) for t, v in zip(block, fact, strict=True)):
            return None
    return f"{display_fact(info.name, fact)} does not match the declared bound {type_bounds.describe(bounds)}"


def analyze(units: list[SourceUnit], check_bounds: bool = True) -> AnalyzedProgram:
    return Analyzer(units, check_bounds).run()
