"""Compile a planned rule into one Python set comprehension over hash indexes.

The generated source never contains text from the program: constants, functions and built-ins are
passed in through the function's namespace by number, and variables are numbered, so a rule written
by anyone (or by a model) cannot inject code.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .analysis import PredicateInfo, Rule
from .ast import COMPARISON_BUILTINS, Apply, Atom, Clause, Comparison, Const, Literal, Negation, Term, Var
from .builtins import FUNCTIONS, PREDICATES, UNBOUND, ValueLimitError, compare
from .planner import SEED_HEAD, SEED_NEGATIVE, SEED_POSITIVE, Seed, input_positions, order_body

SCAN = "scan"  # iterate over every fact
FACTS = "facts"  # the fact set, for membership tests
INDEX = "index"  # dict from the key of the given columns to the facts having it
SEED = "seed"  # the facts the caller seeds the rule with
CALL = "call"  # an external predicate's callable


# The evaluation under way's time budget: [rows enumerated so far, the monotonic deadline, the limit in seconds]
# (Engine.evaluate sets it for an engine with a time limit); None: no budget.
DEADLINE: ContextVar[list[float] | None] = ContextVar("groundstate_logic_deadline", default=None)
_CHECK_EVERY = 4095  # rows between two looks at the clock (a mask: 2**12 - 1)


def watched_rows(rows: Iterable[Any]) -> Iterable[Any]:
    """``rows`` as a watched rule enumerates them: counted against the evaluation's deadline, if it has one."""
    budget = DEADLINE.get()
    return rows if budget is None else _ticking(rows, budget)


def _ticking(rows: Iterable[Any], budget: list[float]) -> Iterator[Any]:
    for row in rows:
        budget[0] += 1
        if not int(budget[0]) & _CHECK_EVERY and time.monotonic() > budget[1]:
            raise ValueLimitError(f"the evaluation took longer than its time limit of {budget[2]:g} s")
        yield row


@dataclass(frozen=True)
class Source:
    kind: str
    predicate: str = ""
    columns: tuple[int, ...] = ()


@dataclass(eq=False)  # a plan is itself: engines key what they resolve for it by the plan
class CompiledRule:
    rule: Rule
    seed: Seed | None
    sources: list[Source]
    function: Callable[..., set[tuple[Any, ...]]]
    code: str
    row_vars: tuple[str, ...] = ()  # for aggregating rules: the variables of each output row


@dataclass
class _Gen:
    predicates: dict[str, PredicateInfo]
    namespace: dict[str, Any] = field(default_factory=lambda: {"E": (), "ONE": (None,)})
    sources: list[Source] = field(default_factory=list)
    clauses: list[str] = field(default_factory=list)
    refs: dict[str, str] = field(default_factory=dict)
    counter: int = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def constant(self, value: Any) -> str:
        name = self.fresh("c")
        self.namespace[name] = value
        return name

    def source(self, source: Source) -> str:
        self.sources.append(source)
        return f"s{len(self.sources) - 1}"

    def expr(self, term: Term) -> str:
        if isinstance(term, Var):
            return self.refs[term.name]
        if isinstance(term, Const):
            return self.constant(term.value)
        assert isinstance(term, Apply)
        fn = self.fresh("f")
        self.namespace[fn] = FUNCTIONS[term.function]
        return f"{fn}(" + ", ".join(self.expr(a) for a in term.args) + ")"

    def is_bound(self, term: Term) -> bool:
        if isinstance(term, Var):
            return term.name in self.refs
        if isinstance(term, Apply):
            return all(self.is_bound(a) for a in term.args)
        return True

    @staticmethod
    def key(exprs: list[str]) -> str:
        return exprs[0] if len(exprs) == 1 else "(" + ", ".join(exprs) + ")"

    def bind_tuple(self, iterable: str, args: tuple[Term, ...], skip: tuple[int, ...] = ()) -> None:
        """Iterate ``iterable``'s tuples, binding fresh variables and filtering on everything else."""
        fresh_names: set[str] = set()
        simple = True
        for i, arg in enumerate(args):
            if i in skip or (isinstance(arg, Var) and arg.name == "_"):
                continue
            if isinstance(arg, Var) and arg.name not in self.refs and arg.name not in fresh_names:
                fresh_names.add(arg.name)
            else:
                simple = False
        if simple:
            targets = []
            for i, arg in enumerate(args):
                if isinstance(arg, Var) and arg.name != "_" and i not in skip:
                    name = self.fresh("v")
                    self.refs[arg.name] = name
                    targets.append(name)
                else:
                    targets.append("_")
            if not targets:  # zero-arity: the only fact is ()
                self.clauses.append(f"for _ in {iterable}")
                return
            target = targets[0] + "," if len(targets) == 1 else ", ".join(targets)
            self.clauses.append(f"for {target} in {iterable}")
            return
        row = self.fresh("t")
        self.clauses.append(f"for {row} in {iterable}")
        self.match_row(row, args, skip)

    def match_row(self, row: str, args: tuple[Term, ...], skip: tuple[int, ...] = ()) -> None:
        for i, arg in enumerate(args):
            if i in skip or (isinstance(arg, Var) and arg.name == "_"):
                continue
            if isinstance(arg, Var) and arg.name not in self.refs:
                self.refs[arg.name] = f"{row}[{i}]"
            else:
                self.clauses.append(f"if {row}[{i}] == {self.expr(arg)}")

    # -- literals --------------------------------------------------------------------------------
    def stored_atom(self, atom: Atom) -> None:
        bound_cols = tuple(i for i, a in enumerate(atom.args) if self.is_bound(a) and not _wild(a))
        if not bound_cols:
            self.bind_tuple(self.source(Source(SCAN, atom.predicate)), atom.args)
            return
        key = self.key([self.expr(atom.args[i]) for i in bound_cols])
        if len(bound_cols) == len(atom.args):
            full = "(" + ", ".join(self.expr(a) for a in atom.args) + ("," if len(atom.args) == 1 else "") + ")"
            self.clauses.append(f"if {full} in {self.source(Source(FACTS, atom.predicate))}")
            return
        index = self.source(Source(INDEX, atom.predicate, bound_cols))
        self.bind_tuple(f"{index}.get({key}, E)", atom.args, skip=bound_cols)

    def negation(self, atom: Atom) -> None:
        cols = tuple(i for i, a in enumerate(atom.args) if not _wild(a))
        if not cols:
            self.clauses.append(f"if not {self.source(Source(FACTS, atom.predicate))}")
        elif len(cols) == len(atom.args):
            full = "(" + ", ".join(self.expr(a) for a in atom.args) + ("," if len(atom.args) == 1 else "") + ")"
            self.clauses.append(f"if {full} not in {self.source(Source(FACTS, atom.predicate))}")
        else:
            key = self.key([self.expr(atom.args[i]) for i in cols])
            self.clauses.append(f"if {key} not in {self.source(Source(INDEX, atom.predicate, cols))}")

    def comparison(self, lit: Comparison) -> None:
        if lit.op == "=":
            for target, other in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(target, Var) and target.name not in self.refs:
                    name = self.fresh("v")
                    self.clauses.append(f"for {name} in [{self.expr(other)}]")
                    self.refs[target.name] = name
                    return
            self.clauses.append(f"if {self.expr(lit.left)} == {self.expr(lit.right)}")
        elif lit.op == "!=":
            self.clauses.append(f"if {self.expr(lit.left)} != {self.expr(lit.right)}")
        else:
            fn = self.fresh("f")
            self.namespace[fn] = _comparator(lit.op)
            self.clauses.append(f"if {fn}({self.expr(lit.left)}, {self.expr(lit.right)})")

    def computed(self, atom: Atom) -> None:
        out = self.fresh("o")
        if atom.predicate.startswith(":"):
            # the built-in checks the arguments it is given and yields full tuples
            given = tuple(i for i, a in enumerate(atom.args) if not _wild(a) and self.is_bound(a))
            fn = self.fresh("b")
            self.namespace[fn] = PREDICATES[atom.predicate].solve
            self.namespace["U"] = UNBOUND
            args = [self.expr(a) if i in given else "U" for i, a in enumerate(atom.args)]
            self.clauses.append(f"for {out} in {fn}({', '.join(args)})")
            self.match_row(out, atom.args, skip=given)
            return
        inputs = input_positions(atom, self.predicates) or ()
        call = self.source(Source(CALL, atom.predicate))
        outputs = tuple(a for i, a in enumerate(atom.args) if i not in inputs)
        self.clauses.append(f"for {out} in {call}(" + ", ".join(self.expr(atom.args[i]) for i in inputs) + ")")
        self.match_row(out, outputs)

    def literal(self, lit: Literal) -> None:
        if isinstance(lit, Negation):
            self.negation(lit.atom)
        elif isinstance(lit, Comparison):
            self.comparison(lit)
        elif input_positions(lit, self.predicates) is None:
            self.stored_atom(lit)
        else:
            self.computed(lit)


def _watched(clause: str) -> str:
    """A ``for TARGET in ROWS`` clause as a watched rule writes it (every other clause as it is). Generated text
    only: a clause's names are numbered, never a program's text."""
    if not clause.startswith("for "):
        return clause
    target, rows = clause[4:].split(" in ", 1)
    return f"for {target} in W({rows})"


def _wild(term: Term) -> bool:
    return isinstance(term, Var) and term.name == "_"


def _comparator(op: str) -> Callable[[Any, Any], bool]:
    name = COMPARISON_BUILTINS[op]
    fast = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}[op]

    def check(a: Any, b: Any) -> bool:
        if type(a) is int and type(b) is int:
            return fast(a, b)  # type: ignore[no-any-return]
        return compare(name, a, b)

    return check


def compile_rule(
    rule: Rule,
    seed: Seed | None,
    predicates: dict[str, PredicateInfo],
    output: tuple[Term, ...] | None = None,
    watched: bool = False,
) -> CompiledRule:
    """The rule as one Python function over its sources; ``output`` replaces the head's terms as what each match
    yields (an explanation asks for every body variable of the matches that derive a given head). ``watched``: every
    row any of its loops enumerates counts against the evaluation's time limit (``DEADLINE``) — for an engine with
    one (a candidate's rules, decided beside the real ones); the enforced policy's plans are not watched."""
    gen = _Gen(predicates)
    body = rule.body
    if rule.aggregates and len(body) == 1 and isinstance(body[0], Atom):
        # a single-atom body aggregates over the matching facts themselves, wildcards included
        atom = body[0]
        hidden = tuple(Var(f"_{i}", a.pos) if _wild(a) else a for i, a in enumerate(atom.args))
        rule = Rule(
            rule.index, Clause(rule.head, (Atom(atom.predicate, hidden, atom.pos),), rule.transform, rule.clause.pos)
        )
        body = rule.body
    if seed is not None:
        iterable = gen.source(Source(SEED))
        if seed.kind == SEED_HEAD:
            gen.bind_tuple(iterable, rule.head.args)
        elif seed.kind == SEED_POSITIVE:
            seeded = body[seed.literal]
            assert isinstance(seeded, Atom)
            gen.bind_tuple(iterable, seeded.args)
        else:
            assert seed.kind == SEED_NEGATIVE
            neg = body[seed.literal]
            assert isinstance(neg, Negation)
            gen.bind_tuple(iterable, neg.atom.args)
    order, _ = order_body(rule, seed, predicates)
    for i in order:
        gen.literal(body[i])
    row_vars: tuple[str, ...] = ()
    transform = rule.transform
    if output is not None:
        output_code = "(" + "".join(gen.expr(a) + ", " for a in output) + ")"
    elif transform is not None and transform.group_by is not None:
        row_vars = tuple(sorted(gen.refs))
        output_code = "(" + "".join(gen.refs[v] + ", " for v in row_vars) + ")"
    else:
        if transform is not None:
            for let in transform.lets:
                name = gen.fresh("v")
                gen.clauses.append(f"for {name} in [{gen.expr(let.expr)}]")
                gen.refs[let.var.name] = name
        output_code = "(" + "".join(gen.expr(a) + ", " for a in rule.head.args) + ")"
    if not gen.clauses or not gen.clauses[0].startswith("for "):
        gen.clauses.insert(0, "for _ in ONE")
    code, function = _function(gen, output_code, watched, rule.index)
    return CompiledRule(rule, seed, gen.sources, function, code, row_vars)


def _function(gen: _Gen, output_code: str, watched: bool, index: int) -> tuple[str, Callable[..., Any]]:
    """The rule's source and its function: one set comprehension over the generated clauses (each loop counted
    against the evaluation's deadline when ``watched``)."""
    if watched:
        gen.namespace["W"] = watched_rows
        gen.clauses = [_watched(clause) for clause in gen.clauses]
    params = ", ".join(f"s{i}" for i in range(len(gen.sources)))
    code = f"def rule({params}):\n    return {{{output_code}\n        " + "\n        ".join(gen.clauses) + "}\n"
    scope = dict(gen.namespace)
    exec(compile(code, f"<rule {index}>", "exec"), scope)
    return code, scope["rule"]
