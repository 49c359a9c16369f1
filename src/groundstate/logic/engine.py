"""The evaluator: semi-naive fixpoints stratum by stratum, and incremental maintenance.

After the first ``evaluate()``, asserted and retracted facts are propagated from the change: a stratum
that reads changed predicates runs delete-rederive (DRed), where a fact inserted into a negated
predicate counts as a deletion and a retracted one as an insertion; only strata with aggregations
over a changed predicate are recomputed. The result is always the one evaluating from scratch gives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import GroundstateError
from .aggregation import aggregate
from .analysis import AnalyzedProgram, PredicateInfo, Rule, Stratum, bounds_problem
from .ast import Apply, Atom, Const, Negation, Term, Var
from .builtins import FUNCTIONS, BuiltinError, ValueLimitError
from .codegen import CALL, FACTS, INDEX, SCAN, SEED, CompiledRule, compile_rule
from .errors import EvaluationError, EvaluationLimitError, FactError
from .gcpause import gc_paused
from .parser import parse_atom
from .planner import SEED_HEAD, SEED_NEGATIVE, SEED_POSITIVE, Seed
from .program import Program
from .storage import Fact, Relation
from .values import sort_facts, to_value

External = Callable[..., Any]
Changes = dict[str, tuple[set[Fact], set[Fact]]]  # predicate -> (inserted, deleted)
INSERTED, DELETED = 0, 1


@dataclass
class Stats:
    """What the last evaluate() did."""

    mode: str = "none"  # "full" or "incremental"
    iterations: int = 0
    created: int = 0
    seconds: float = 0.0
    strata_recomputed: int = 0
    strata_updated: int = 0
    facts: dict[str, int] = field(default_factory=dict)


class Engine:
    """Evaluates a Program. Static analysis runs in the constructor and raises AnalysisError."""

    def __init__(
        self,
        program: Program,
        *,
        created_fact_limit: int | None = None,
        check_bounds: bool = True,
        externals: Mapping[str, External] | None = None,
    ) -> None:
        self.analyzed: AnalyzedProgram = program.analyze(check_bounds)
        self.predicates: dict[str, PredicateInfo] = self.analyzed.predicates
        self.created_fact_limit = created_fact_limit
        self.check_bounds = check_bounds
        self.relations = {
            name: Relation(name, info.arity) for name, info in self.predicates.items() if not info.external
        }
        self.base: dict[str, set[Fact]] = {name: set() for name in self.relations}
        for pred, facts in self.analyzed.facts.items():
            self.base[pred].update(fact for fact, _ in facts)
        self._toggled: dict[str, set[Fact]] = {}
        self._compiled: dict[tuple[int, Seed | None], CompiledRule] = self.analyzed.plans
        self._variants: dict[int, list[tuple[str, str, CompiledRule]]] = {}
        self._externals: dict[str, External] = {}
        self._needs_full = True
        self._created = 0
        self.stats = Stats()
        self._reads = [self._stratum_reads(s) for s in self.analyzed.strata]
        for name, fn in (externals or {}).items():
            self.register_external(name, fn)

    # -- public API -------------------------------------------------------------------------------
    def register_external(self, predicate: str, function: External) -> None:
        """Serve an ``external()`` predicate: called with the "+" arguments, it returns an iterable of
        tuples of the "-" arguments (or a bool when every argument is an input)."""
        info = self.predicates.get(predicate)
        if info is None or not info.external:
            raise FactError(f"{predicate} is not declared with descr [external(), mode(...)]")
        assert info.modes is not None
        outputs = info.modes.count("-")
        self._externals[predicate] = _wrap_external(predicate, function, outputs)

    def assert_facts(self, predicate: str, rows: Iterable[Iterable[Any]]) -> int:
        """Add base facts; returns how many were new. Takes effect at the next evaluate()."""
        facts = self._convert(predicate, rows)
        base, toggled = self.base[predicate], self._toggled.setdefault(predicate, set())
        added = 0
        for fact in facts:
            if fact not in base:
                base.add(fact)
                toggled ^= {fact}
                added += 1
        return added

    def retract_facts(self, predicate: str, rows: Iterable[Iterable[Any]]) -> int:
        """Remove base facts; returns how many were present. Derived facts go when no rule derives them."""
        facts = self._convert(predicate, rows, check_bounds=False)
        base, toggled = self.base[predicate], self._toggled.setdefault(predicate, set())
        removed = 0
        for fact in facts:
            if fact in base:
                base.discard(fact)
                toggled ^= {fact}
                removed += 1
        return removed

    @property
    def pending(self) -> bool:
        """Whether asserted or retracted facts are waiting for an evaluation."""
        return self._needs_full or any(self._toggled.values())

    def evaluate(self, *, full: bool = False) -> Stats:
        """Bring derived facts up to date: incrementally after the first call, unless ``full``."""
        started = time.perf_counter()
        self._created = 0
        self.stats = Stats()
        try:
            with gc_paused():
                if full or self._needs_full:
                    self._evaluate_full()
                else:
                    self._evaluate_incremental()
        except BaseException:
            self._needs_full = True  # the store is half-updated: the next evaluate() starts afresh
            raise
        self._toggled = {}
        self.stats.created = self._created
        self.stats.seconds = time.perf_counter() - started
        self.stats.facts = {name: len(rel) for name, rel in sorted(self.relations.items())}
        return self.stats

    def query(self, pattern: str, *, sort: bool = True) -> list[tuple[Any, ...]]:
        """Facts matching ``pattern`` (e.g. ``path(/a, X)``), sorted unless ``sort=False``; evaluates pending
        changes first."""
        atom = parse_atom(pattern)
        relation = self.relations.get(atom.predicate)
        if relation is None:
            raise FactError(f"could not find predicate {atom.predicate} to query")
        if relation.arity != len(atom.args):
            raise FactError(f"{atom.predicate} has {relation.arity} arguments, the query gives {len(atom.args)}")
        bound: dict[int, Any] = {}
        first: dict[str, int] = {}
        same: list[tuple[int, int]] = []
        for i, arg in enumerate(atom.args):
            if isinstance(arg, Var):
                if arg.name == "_":
                    continue
                if arg.name in first:
                    same.append((first[arg.name], i))
                else:
                    first[arg.name] = i
            else:
                bound[i] = _constant(arg)
        found = self.lookup(atom.predicate, bound)
        if same:
            found = [f for f in found if all(f[i] == f[j] for i, j in same)]
        return sort_facts(found) if sort else found

    def lookup(self, predicate: str, bound: dict[int, Any]) -> list[Fact]:
        """The facts of ``predicate`` whose columns ``bound`` (position → value) hold those values, through the
        relation's index on exactly those columns, unsorted — what ``query`` does once the pattern is parsed, for
        callers that have the values already (the runtime's guards ask dozens of these per agent)."""
        relation = self.relations.get(predicate)
        if relation is None:
            raise FactError(f"could not find predicate {predicate}")
        if any(not 0 <= column < relation.arity for column in bound):
            raise FactError(f"{predicate} has {relation.arity} arguments: no column {sorted(bound)}")
        if self.pending:
            self.evaluate()
        if not bound:
            return list(relation.facts)
        columns = tuple(sorted(bound))
        key = bound[columns[0]] if len(columns) == 1 else tuple(bound[c] for c in columns)
        return list(relation.index(columns).get(key, ()))

    def facts(self, predicate: str, *, sort: bool = True) -> list[Fact]:
        """Every fact of ``predicate``, sorted unless ``sort=False`` (sorting a large relation costs more than
        deriving it); evaluates pending changes first."""
        relation = self.relations.get(predicate)
        if relation is None:
            raise FactError(f"could not find predicate {predicate}")
        if self.pending:
            self.evaluate()
        return sort_facts(relation.facts) if sort else list(relation.facts)

    def all_facts(self) -> dict[str, list[Fact]]:
        """Every relation's facts (derived ones included), sorted, evaluating first if needed."""
        if self.pending:
            self.evaluate()
        return {name: sort_facts(rel.facts) for name, rel in sorted(self.relations.items())}

    def plans(self) -> list[str]:
        """The generated code of every plan compiled so far, for inspection."""
        return [c.code for c in self._compiled.values()]

    # -- facts in -----------------------------------------------------------------------------------
    def _arity(self, predicate: str) -> int:
        relation = self.relations.get(predicate)
        if relation is None:
            raise FactError(f"could not find predicate {predicate}")
        return relation.arity

    def _convert(self, predicate: str, rows: Iterable[Iterable[Any]], check_bounds: bool = True) -> list[Fact]:
        arity = self._arity(predicate)
        info = self.predicates[predicate]
        out = []
        for row in rows:
            try:
                fact = tuple(to_value(v) for v in row)
            except (TypeError, ValueError) as exc:
                raise FactError(f"bad value in {predicate}{tuple(row)!r}: {exc}") from None
            if len(fact) != arity:
                raise FactError(f"{predicate} has {arity} arguments, got {len(fact)}: {fact!r}")
            if check_bounds and self.check_bounds and info.decl is not None:
                problem = bounds_problem(info, fact)
                if problem:
                    raise FactError(problem)
            out.append(fact)
        return out

    # -- running compiled rules -----------------------------------------------------------------------
    def _plan(self, rule: Rule, seed: Seed | None) -> CompiledRule:
        key = (rule.index, seed)
        plan = self._compiled.get(key)
        if plan is None:
            plan = compile_rule(rule, seed, self.predicates)
            self._compiled[key] = plan
        return plan

    def _run(self, rule: Rule, seed: Seed | None = None, seed_facts: Iterable[Fact] = ()) -> set[Fact]:
        return self._execute(self._plan(rule, seed), seed_facts)

    def _execute(self, plan: CompiledRule, seed_facts: Iterable[Fact] = ()) -> set[Fact]:
        rule = plan.rule
        args: list[Any] = []
        for source in plan.sources:
            kind = source.kind
            if kind == SEED:
                args.append(seed_facts)
            elif kind in (SCAN, FACTS):
                args.append(self.relations[source.predicate].facts)
            elif kind == INDEX:
                args.append(self.relations[source.predicate].index(source.columns))
            else:
                assert kind == CALL
                fn = self._externals.get(source.predicate)
                if fn is None:
                    raise EvaluationError(
                        f"external predicate {source.predicate} has no registered function", rule.clause.pos
                    )
                args.append(fn)
        try:
            result = plan.function(*args)
            if plan.row_vars or (rule.aggregates and plan.seed is None):
                result = aggregate(rule, plan.row_vars, result)
        except ValueLimitError as exc:
            raise EvaluationLimitError(f"{exc} (in the clause {rule.clause})", rule.clause.pos) from None
        except (BuiltinError, _ExternalError) as exc:
            raise EvaluationError(f"{exc} (in the clause {rule.clause})", rule.clause.pos) from None
        return result

    def _recursive_variants(self, stratum: Stratum) -> list[tuple[str, str, CompiledRule]]:
        """(body predicate, head predicate, plan seeded from that body atom) for every recursive atom."""
        key = id(stratum)
        variants = self._variants.get(key)
        if variants is None:
            members = set(stratum.predicates)
            variants = [
                (lit.predicate, rule.head.predicate, self._plan(rule, Seed(SEED_POSITIVE, i)))
                for rule in stratum.rules
                if not rule.aggregates
                for i, lit in enumerate(rule.body)
                if isinstance(lit, Atom) and lit.predicate in members
            ]
            self._variants[key] = variants
        return variants

    def _insert(self, predicate: str, new: set[Fact]) -> None:
        if not new:
            return
        self.relations[predicate].add(new)
        self._created += len(new)
        limit = self.created_fact_limit
        if limit is not None and self._created > limit:
            raise EvaluationError(
                f"created-fact limit of {limit} reached (while deriving {predicate}); the program may be"
                " generating unboundedly many facts — raise created_fact_limit if this is expected"
            )

    # -- full evaluation ------------------------------------------------------------------------------
    def _evaluate_full(self) -> None:
        self.stats.mode = "full"
        for stratum in self.analyzed.strata:
            self._recompute(stratum)
        self._needs_full = False

    def _recompute(self, stratum: Stratum, changes: Changes | None = None) -> None:
        old = {p: self.relations[p].facts for p in stratum.predicates if p in self.relations}
        for pred in old:
            relation = self.relations[pred]
            relation.clear()
            relation.add(set(self.base[pred]))
        self.stats.strata_recomputed += 1
        delta: dict[str, set[Fact]] = {}
        for rule in stratum.rules:
            if rule.aggregates:
                self._collect(delta, rule.head.predicate, self._run(rule))
        self._insert_delta(delta)
        delta = {}
        for rule in stratum.rules:
            if not rule.aggregates:
                self._collect(delta, rule.head.predicate, self._run(rule))
        self._insert_delta(delta)
        self._fixpoint(stratum, delta)
        if changes is not None:
            for pred, before in old.items():
                after = self.relations[pred].facts
                ins, dels = after - before, before - after
                if ins or dels:
                    changes[pred] = (ins, dels)

    def _insert_delta(self, delta: dict[str, set[Fact]]) -> None:
        for pred, new in delta.items():
            self._insert(pred, new)

    def _fixpoint(self, stratum: Stratum, delta: dict[str, set[Fact]], track: bool = False) -> dict[str, set[Fact]]:
        """Semi-naive iteration from ``delta`` (already inserted); with ``track``, returns everything inserted."""
        inserted = {p: set(f) for p, f in delta.items()} if track else {}
        if not stratum.recursive:
            return inserted
        variants = self._recursive_variants(stratum)
        while any(delta.values()):
            self.stats.iterations += 1
            new: dict[str, set[Fact]] = {}
            for body_predicate, head_predicate, plan in variants:
                facts = delta.get(body_predicate)
                if facts:
                    self._collect(new, head_predicate, self._execute(plan, facts))
            self._insert_delta(new)
            if track:
                for pred, facts in new.items():
                    inserted.setdefault(pred, set()).update(facts)
            delta = new
        return inserted

    def _collect(self, delta: dict[str, set[Fact]], predicate: str, heads: set[Fact]) -> None:
        fresh = heads - self.relations[predicate].facts
        bucket = delta.get(predicate)
        if bucket is None:
            delta[predicate] = fresh
        else:
            bucket |= fresh

    # -- incremental maintenance ----------------------------------------------------------------------
    def _evaluate_incremental(self) -> None:
        self.stats.mode = "incremental"
        changes: Changes = {}
        base_ins: dict[str, set[Fact]] = {}
        base_del: dict[str, set[Fact]] = {}
        for pred, toggled in self._toggled.items():
            base = self.base[pred]
            ins = {f for f in toggled if f in base}
            if ins:
                base_ins[pred] = ins
            if len(ins) != len(toggled):
                base_del[pred] = toggled - ins
        for i, stratum in enumerate(self.analyzed.strata):
            reads = self._reads[i]
            touched = any(p in base_ins or p in base_del for p in stratum.predicates) or any(
                p in changes for p in reads
            )
            if not touched:
                continue
            if stratum.aggregates:
                self._recompute(stratum, changes)
            else:
                self._delete_rederive(stratum, reads, changes, base_ins, base_del)

    def _stratum_reads(self, stratum: Stratum) -> set[str]:
        return {p for rule in stratum.rules for p, _ in rule.body_predicates() if p in self.relations}

    def _delete_rederive(
        self,
        stratum: Stratum,
        reads: set[str],
        changes: Changes,
        base_ins: dict[str, set[Fact]],
        base_del: dict[str, set[Fact]],
    ) -> None:
        """DRed for one stratum: over-delete, remove, re-derive what is still supported, insert, report the net."""
        self.stats.strata_updated += 1
        members = set(stratum.predicates)
        lower = {p: changes[p] for p in reads if p in changes}
        overdeleted = self._overdelete(stratum, lower, members, base_del)
        for pred, gone in overdeleted.items():
            if gone:
                self.relations[pred].remove(gone)
        delta = self._rederive(stratum, overdeleted)
        inserted = self._insert_new(stratum, lower, members, base_ins, delta)
        for pred in members:  # the net change, for the strata above
            gone = overdeleted[pred] - self.relations[pred].facts
            added = inserted.get(pred, set()) - overdeleted[pred]
            if gone or added:
                changes[pred] = (added, gone)

    def _overdelete(
        self, stratum: Stratum, lower: Changes, members: set[str], base_del: dict[str, set[Fact]]
    ) -> dict[str, set[Fact]]:
        """Step 1: everything that may have lost a derivation, found against the old state of the lower strata
        (their changes are undone for the search and redone after it)."""
        for pred, (ins, dels) in lower.items():
            self.relations[pred].remove(ins)
            self.relations[pred].add(dels)
        overdeleted: dict[str, set[Fact]] = {p: set() for p in members}
        frontier: dict[str, set[Fact]] = {}
        for pred in members:
            gone = base_del.get(pred, set()) & self.relations[pred].facts
            if gone:
                overdeleted[pred] |= gone
                frontier[pred] = gone
        heads: dict[str, set[Fact]] = {}
        self._seed_from_lower(stratum, lower, heads, positive=DELETED, negated=INSERTED)
        self._grow_overdeleted(heads, overdeleted, frontier)
        while frontier:
            self.stats.iterations += 1
            heads = {}
            for rule in stratum.rules:
                for i, lit in enumerate(rule.body):
                    if isinstance(lit, Atom) and frontier.get(lit.predicate):
                        self._merge(heads, rule, self._run(rule, Seed(SEED_POSITIVE, i), frontier[lit.predicate]))
            frontier = {}
            self._grow_overdeleted(heads, overdeleted, frontier)
        for pred, (ins, dels) in lower.items():
            self.relations[pred].remove(dels)
            self.relations[pred].add(ins)
        return overdeleted

    def _rederive(self, stratum: Stratum, overdeleted: dict[str, set[Fact]]) -> dict[str, set[Fact]]:
        """Step 3: the over-deleted facts still supported by the new state (base facts, or a rule's body)."""
        delta = {pred: gone & self.base[pred] for pred, gone in overdeleted.items() if gone}
        for rule in stratum.rules:
            candidates = overdeleted[rule.head.predicate] - delta.get(rule.head.predicate, set())
            if candidates:
                self._merge(delta, rule, self._run(rule, Seed(SEED_HEAD), candidates))
        return delta

    def _insert_new(
        self,
        stratum: Stratum,
        lower: Changes,
        members: set[str],
        base_ins: dict[str, set[Fact]],
        delta: dict[str, set[Fact]],
    ) -> dict[str, set[Fact]]:
        """Step 4: insert the re-derived facts, new base facts and what the lower strata's insertions (and
        deletions under '!') derive, up to the fixpoint; returns everything inserted."""
        for pred in members:
            fresh = base_ins.get(pred, set()) - self.relations[pred].facts
            if fresh:
                delta.setdefault(pred, set()).update(fresh)
        self._seed_from_lower(stratum, lower, delta, positive=INSERTED, negated=DELETED)
        for pred, facts in delta.items():
            facts -= self.relations[pred].facts
        self._insert_delta(delta)
        return self._fixpoint(stratum, delta, track=True)

    def _seed_from_lower(
        self, stratum: Stratum, lower: Changes, heads: dict[str, set[Fact]], positive: int, negated: int
    ) -> None:
        """Run every rule from what the lower strata changed: a positive atom from its predicate's
        ``lower[p][positive]`` facts, a negated atom from ``lower[p][negated]`` (INSERTED or DELETED)."""
        for rule in stratum.rules:
            for i, lit in enumerate(rule.body):
                if isinstance(lit, Atom) and lit.predicate in lower and lower[lit.predicate][positive]:
                    self._merge(heads, rule, self._run(rule, Seed(SEED_POSITIVE, i), lower[lit.predicate][positive]))
                elif isinstance(lit, Negation) and lit.atom.predicate in lower and lower[lit.atom.predicate][negated]:
                    seed = lower[lit.atom.predicate][negated]
                    self._merge(heads, rule, self._run(rule, Seed(SEED_NEGATIVE, i), seed))

    @staticmethod
    def _merge(heads: dict[str, set[Fact]], rule: Rule, found: set[Fact]) -> None:
        if found:
            heads.setdefault(rule.head.predicate, set()).update(found)

    def _grow_overdeleted(
        self, heads: dict[str, set[Fact]], overdeleted: dict[str, set[Fact]], frontier: dict[str, set[Fact]]
    ) -> None:
        for pred, found in heads.items():
            fresh = (found & self.relations[pred].facts) - overdeleted[pred]
            if fresh:
                overdeleted[pred] |= fresh
                frontier[pred] = fresh


class _ExternalError(GroundstateError):
    """A user's external predicate failed; re-raised as an EvaluationError naming the predicate."""


def _wrap_external(predicate: str, function: External, outputs: int) -> Callable[..., list[Fact]]:
    def call(*inputs: Any) -> list[Fact]:
        try:
            result = function(*inputs)
        except Exception as exc:  # a user's callable: report it, naming the predicate
            raise _ExternalError(f"external predicate {predicate} raised {type(exc).__name__}: {exc}") from exc
        if isinstance(result, bool):
            return [()] if result else []
        rows = []
        try:
            for row in result:
                row = tuple(row) if isinstance(row, tuple | list) else (row,)
                if len(row) != outputs:
                    raise _ExternalError(
                        f"external predicate {predicate} returned {len(row)} values, expected {outputs}"
                    )
                rows.append(tuple(to_value(v) for v in row))
        except (TypeError, ValueError) as exc:
            raise _ExternalError(f"external predicate {predicate} returned a bad value: {exc}") from None
        return rows

    return call


def _constant(term: Term) -> Any:
    if isinstance(term, Const):
        return term.value
    if not isinstance(term, Apply):
        raise FactError(f"query arguments must be constants or variables, not {term} inside a function")
    if term.function not in FUNCTIONS:
        raise FactError(f"unknown function {term.function} in query")
    try:
        return FUNCTIONS[term.function](*(_constant(a) for a in term.args))
    except BuiltinError as exc:
        raise FactError(str(exc)) from None
