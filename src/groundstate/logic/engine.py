"""The evaluator: semi-naive fixpoints stratum by stratum, and incremental maintenance.

After the first ``evaluate()``, asserted and retracted facts are propagated from the change: a stratum
that reads changed predicates runs delete-rederive (DRed), where a fact inserted into a negated
predicate counts as a deletion and a retracted one as an insertion; only strata with aggregations
over a changed predicate are recomputed. The result is always the one evaluating from scratch gives.
"""

from __future__ import annotations

import gc
import heapq
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ..errors import GroundstateError
from . import fundeps
from .aggregation import aggregate
from .analysis import AnalyzedProgram, PredicateInfo, Rule, Stratum, bounds_problem
from .ast import Apply, Atom, Clause, Const, Negation, Term, Var
from .builtins import FUNCTIONS, BuiltinError, ValueLimitError
from .codegen import CALL, DEADLINE, INDEX, SEED, CompiledRule, compile_rule
from .errors import EvaluationError, EvaluationLimitError, FactError
from .gcpause import gc_paused
from .grouped import GroupedRows, Journal
from .parser import parse_atom
from .planner import SEED_HEAD, SEED_NEGATIVE, SEED_POSITIVE, Seed
from .program import Program
from .schedule import Step, compile_step
from .storage import Fact, Relation
from .type_bounds import fits_any
from .values import sort_facts, to_value

External = Callable[..., Any]
Changes = dict[str, tuple[set[Fact], set[Fact]]]  # predicate -> (inserted, deleted)
SeedPlan = tuple[Rule, int, str, bool, CompiledRule]  # rule, body literal, its predicate, negated?, seeded plan
INSERTED, DELETED = 0, 1
_STEPS_KEPT = 256  # compiled incremental steps an engine keeps (one per set of inserted predicates seen twice)


class _ExternalError(GroundstateError):
    """A user's external predicate failed; re-raised as an EvaluationError naming the predicate."""


@dataclass
class Stats:
    """What the last evaluate() did."""

    mode: str = "none"  # "full" or "incremental"
    iterations: int = 0
    created: int = 0
    seconds: float = 0.0
    strata_recomputed: int = 0
    strata_updated: int = 0
    counts: Callable[[], dict[str, int]] | None = field(default=None, repr=False)

    @property
    def facts(self) -> dict[str, int]:
        """Facts per predicate after the evaluation, counted when asked (counting every relation after each
        evaluation would cost a one-call decision more than deriving it)."""
        return self.counts() if self.counts is not None else {}


class Engine:
    """Evaluates a Program. Static analysis runs in the constructor and raises AnalysisError."""

    def __init__(
        self,
        program: Program,
        *,
        created_fact_limit: int | None = None,
        check_bounds: bool = True,
        externals: Mapping[str, External] | None = None,
        time_limit: float | None = None,
    ) -> None:
        """``time_limit``: seconds one ``evaluate`` may take, checked as its rules enumerate rows (an
        EvaluationLimitError naming the rule past it) — for rules nobody has to obey (a shadow candidate, a replay),
        which must never hold up the real decision; None: no limit, and no cost."""
        self.analyzed: AnalyzedProgram = program.analyze(check_bounds)
        self.time_limit = time_limit
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
        self._compiled: dict[tuple[int, Seed | None], CompiledRule] = \
            self.analyzed.plans if time_limit is None else self.analyzed.watched_plans  # fmt: skip
        self._variants: dict[int, list[tuple[str, str, CompiledRule]]] = {}
        self._negated: dict[int, set[str]] = {}  # per stratum (by id): the predicates its rules negate
        self._derivation_plans: dict[tuple[int, tuple[str, ...]], CompiledRule] = {}  # see derivations()
        self._shared_columns: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}  # see _blocks_stored
        heads = [rule.head.predicate for rule in self.analyzed.rules]
        single = {predicate for predicate in heads if heads.count(predicate) == 1}
        self._grouped: dict[int, GroupedRows] = {}  # per aggregating rule kept by group (its index), once evaluated
        self._groupable = [
            all(GroupedRows.eligible(rule, single) for rule in stratum.rules)
            and all(not self.base.get(p) for p in stratum.predicates)
            for stratum in self.analyzed.strata
        ]  # strata of aggregating rules alone whose heads have no asserted facts: maintained group by group
        self._journal: Journal | None = None  # while a supposition is open: each group's state before it changed
        self._externals: dict[str, External] = {}
        self._needs_full = True
        self._created = 0
        self.stats = Stats()
        self._reads = [self._stratum_reads(s) for s in self.analyzed.strata]
        self._readers: dict[str, list[int]] = {}  # predicate -> the strata whose rules read it
        for number, reads in enumerate(self._reads):
            for predicate in reads:
                self._readers.setdefault(predicate, []).append(number)
        self._stratum_number = {id(s): i for i, s in enumerate(self.analyzed.strata)}
        self._seeds: dict[int, list[SeedPlan]] = {}  # per stratum (by id), see _stratum_seeds
        self._member_sets: dict[int, frozenset[str]] = {}  # each stratum's predicates (by id), see _members
        self._fits: dict[str, Callable[[Fact], bool] | None] = {}  # per predicate, see _bounds_test
        self._fundeps = {name: info.fundeps for name, info in self.predicates.items()
                         if info.fundeps and name in self.relations}  # fmt: skip
        self._seeds_by_predicate: dict[int, dict[str, list[SeedPlan]]] = {}  # the same, by the seeding predicate
        self._inputs: dict[int, list[tuple[str, Any, tuple[int, ...]]]] = {}  # per plan (by id), see _execute
        self._steps: dict[frozenset[str], Step | int] = {}  # see _compiled_step: a step, or how often seen before
        self.steps_after: int | None = 1  # see _compiled_step
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
        self._inputs.clear()  # plans resolved the previous function
        self._steps.clear()  # and so did the compiled steps

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

    def evaluate(self, *, full: bool = False, changes: Changes | None = None) -> Stats:
        """Bring derived facts up to date: incrementally after the first call, unless ``full``. ``changes``, for an
        incremental evaluation, receives what it inserted and deleted per predicate (what ``supposing`` undoes)."""
        started = time.perf_counter()
        self._created = 0
        self.stats = Stats()
        budget = DEADLINE.set([0, time.monotonic() + self.time_limit, self.time_limit]) \
            if self.time_limit is not None else None  # fmt: skip
        recorded: Changes = {} if changes is None else changes
        try:
            with gc_paused():
                if full or self._needs_full:
                    if changes is not None:
                        raise FactError("a full evaluation does not record its changes")
                    self._evaluate_full()
                else:
                    self._evaluate_incremental(recorded)
                self._check_fundeps(None if self.stats.mode == "full" else recorded)
        except BaseException:
            self._needs_full = True  # the store is half-updated: the next evaluate() starts afresh
            raise
        finally:
            if budget is not None:
                DEADLINE.reset(budget)
        self._toggled = {}
        self.stats.created = self._created
        self.stats.seconds = time.perf_counter() - started
        counts = {name: len(rel) for name, rel in sorted(self.relations.items())} if self.stats.mode == "full" else None
        self.stats.counts = (lambda: counts) if counts is not None else self._counts
        return self.stats

    def _check_fundeps(self, changes: Changes | None) -> None:
        """The Decls' functional dependencies hold on what this evaluation inserted (``changes``; None: on every
        fact, after a full evaluation) — FunctionalDependencyError naming the clash and the Decl otherwise."""
        for predicate, declared in self._fundeps.items():
            if changes is None:
                fundeps.check(predicate, self.relations[predicate], declared, None)
            elif predicate in changes and changes[predicate][0]:
                fundeps.check(predicate, self.relations[predicate], declared, changes[predicate][0])

    @contextmanager
    def supposing(self, facts: Mapping[str, Iterable[Iterable[Any]]]) -> Iterator[Stats]:
        """What the rules derive if ``facts`` (predicate → rows) held, for the length of the ``with`` block; after it
        the engine is exactly as before — the facts and everything derived from them gone, anything they blocked
        back — without a second evaluation: the evaluation's own record of what it changed is undone.

        This is the decision path's core (one tools/call's facts asserted, the verdict read, the facts gone): the
        consequences are derived incrementally from the supposed facts alone, and the retraction costs set
        operations, not a delete-rederive pass. Facts that already held are not supposed (and stay after)."""
        if self.pending:
            self.evaluate()
        added: dict[str, set[Fact]] = {}
        changes: Changes = {}
        self._journal = []
        try:
            for predicate, rows in facts.items():
                fresh = {fact for fact in self._convert(predicate, rows) if fact not in self.base[predicate]}
                if fresh:
                    self.base[predicate] |= fresh
                    added[predicate] = fresh
            self._evaluate_supposed(added, changes)
        except BaseException:  # an evaluation that failed half-way: what it derived so far is undone too
            self._undo_supposed(added, changes)
            raise
        try:
            yield self.stats
        finally:
            self._undo_supposed(added, changes)

    def _evaluate_supposed(self, added: dict[str, set[Fact]], changes: Changes) -> None:
        """``evaluate(changes=changes)`` after the supposed facts ``added`` (already in the base): their compiled step
        run straight away when there is one — the decision path, without the generic evaluation's set-up."""
        step = self._compiled_step(frozenset(added)) if added and self.time_limit is None else None
        if step is None:
            self._toggled = {predicate: set(fresh) for predicate, fresh in added.items()}
            self.evaluate(changes=changes)
            return
        started = time.perf_counter()
        self.stats = stats = Stats(mode="incremental")
        self._created = 0
        collecting = gc.isenabled()
        gc.disable()  # as gc_paused: the evaluation builds tuples that never form cycles
        try:
            step(added, changes, stats)
            self._check_fundeps(changes)
        except BaseException:
            self._needs_full = True  # as evaluate(): the next one starts afresh
            raise
        finally:
            if collecting:
                gc.enable()
        stats.created, stats.seconds, stats.counts = self._created, time.perf_counter() - started, self._counts

    def _undo_supposed(self, added: dict[str, set[Fact]], changes: Changes) -> None:
        """Put back the state before ``supposing``: its base facts, every derived change it made and the groups of
        the aggregating rules it touched."""
        journal, self._journal = self._journal or [], None
        for grouped, key, rows, head, totals in reversed(journal):
            grouped.restore(key, rows, head, totals)
        for predicate, fresh in added.items():
            self.base[predicate] -= fresh
        for predicate, (inserted, deleted) in changes.items():
            relation = self.relations[predicate]
            relation.remove(inserted)
            if deleted:
                relation.add(deleted)
        self._toggled = {}

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

    def derivations(self, rule: Rule, fact: Fact, variables: tuple[str, ...]) -> list[Fact]:
        """The values of ``variables`` in each instantiation of ``rule``'s body (over the current facts) that derives
        ``fact``, sorted: what an explanation shows, found from the fact itself rather than by evaluating every
        rule's instantiations (``rule`` has no transform; ``variables`` are its body's)."""
        if self.pending:
            self.evaluate()
        key = (rule.index, variables)
        plan = self._derivation_plans.get(key)
        if plan is None:
            terms = tuple(Var(name, rule.head.pos) for name in variables)
            plan = self._derivation_plans[key] = compile_rule(rule, Seed(SEED_HEAD), self.predicates, output=terms)
        return sort_facts(self._execute(plan, [fact]))

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
        fits = self._bounds_test(info) if check_bounds and self.check_bounds else None
        out = []
        for row in rows:
            try:
                fact = tuple([v if type(v) is str else to_value(v) for v in row])  # a string is its own value
            except (TypeError, ValueError) as exc:
                raise FactError(f"bad value in {predicate}{tuple(row)!r}: {exc}") from None
            if len(fact) != arity:
                raise FactError(f"{predicate} has {arity} arguments, got {len(fact)}: {fact!r}")
            if fits is not None and not fits(fact):
                raise FactError(bounds_problem(info, fact) or f"{predicate}{fact!r} does not match its bounds")
            out.append(fact)
        return out

    def _bounds_test(self, info: PredicateInfo) -> Callable[[Fact], bool] | None:
        """The predicate's declared bounds as one compiled test (None: nothing to check), made once per engine."""
        if info.name not in self._fits:
            bounds = info.decl.bounds if info.decl is not None else ()
            usable = bounds and all(len(block) == info.arity for block in bounds)  # as bounds_problem: else unchecked
            self._fits[info.name] = fits_any(bounds) if usable else None
        return self._fits[info.name]

    # -- running compiled rules -----------------------------------------------------------------------
    def _plan(self, rule: Rule, seed: Seed | None) -> CompiledRule:
        key = (rule.index, seed)
        plan = self._compiled.get(key)
        if plan is None:
            plan = compile_rule(rule, seed, self.predicates, watched=self.time_limit is not None)
            self._compiled[key] = plan
        return plan

    def _run(
        self, rule: Rule, seed: Seed | None = None, seed_facts: Iterable[Fact] = (), raw: bool = False
    ) -> set[Fact]:
        return self._execute(self._plan(rule, seed), seed_facts, raw)

    def _execute(self, plan: CompiledRule, seed_facts: Iterable[Fact] = (), raw: bool = False) -> set[Fact]:
        """The plan's head facts (``raw``: an aggregating rule's body rows, before grouping)."""
        inputs = self._inputs.get(id(plan))
        if inputs is None:
            inputs = self._inputs[id(plan)] = [self._input(plan, source) for source in plan.sources]
        args = [
            seed_facts if kind is SEED else target.index(columns) if kind is INDEX else target if kind is CALL
            else target.facts
            for kind, target, columns in inputs
        ]  # fmt: skip
        rule = plan.rule
        try:
            result = plan.function(*args)
            if not raw and (plan.row_vars or (plan.seed is None and rule.aggregates)):
                result = aggregate(rule, plan.row_vars, result)
        except self._caught as exc:
            self._plan_failed(rule, exc)
        return result

    @staticmethod
    def _plan_failed(rule: Rule, exc: Exception) -> NoReturn:
        """A built-in's or an external's failure in a rule, reported as the clause's (a limit as a limit)."""
        kind = EvaluationLimitError if isinstance(exc, ValueLimitError) else EvaluationError
        raise kind(f"{exc} (in the clause {rule.clause})", rule.clause.pos) from None

    _caught = (ValueLimitError, BuiltinError, _ExternalError)  # what _plan_failed reports

    def _input(self, plan: CompiledRule, source: Any) -> tuple[str, Any, tuple[int, ...]]:
        """Where a plan's source comes from in this engine: its relation (facts or an index) or external."""
        if source.kind == CALL:
            return CALL, self._external(plan, source.predicate), ()
        if source.kind == SEED:
            return SEED, None, ()
        return source.kind, self.relations[source.predicate], source.columns

    def _external(self, plan: CompiledRule, predicate: str) -> Callable[..., list[Fact]]:
        """The registered function of an external predicate a plan calls."""
        fn = self._externals.get(predicate)
        if fn is None:
            raise EvaluationError(f"external predicate {predicate} has no registered function", plan.rule.clause.pos)
        return fn

    def _recursive_variants(self, stratum: Stratum) -> list[tuple[str, str, CompiledRule]]:
        """(body predicate, head predicate, plan seeded from that body atom) for every recursive atom."""
        key = id(stratum)
        variants = self._variants.get(key)
        if variants is None:
            members = set(stratum.predicates)
            variants = self._variants[key] = [
                (predicate, rule.head.predicate, plan)
                for rule, _, predicate, is_negation, plan in self._stratum_seeds(stratum)
                if not is_negation and not rule.aggregates and predicate in members
            ]
        return variants

    def _insert(self, predicate: str, new: set[Fact]) -> None:
        if not new:
            return
        self.relations[predicate].add(new)
        self._created += len(new)
        limit = self.created_fact_limit
        if limit is not None and self._created > limit:
            self._over_limit(predicate)

    def _over_limit(self, predicate: str) -> NoReturn:
        raise EvaluationError(
            f"created-fact limit of {self.created_fact_limit} reached (while deriving {predicate}); the program may be"
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
                self._collect(delta, rule.head.predicate, self._aggregate_all(rule, stratum))
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
        """Semi-naive iteration from ``delta`` (already inserted); with ``track``, returns everything inserted (for a
        stratum that does not recurse, ``delta`` itself: nothing more is derived)."""
        if not stratum.recursive:
            return delta if track else {}
        inserted = {p: set(f) for p, f in delta.items()} if track else {}
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
    def _base_changes(self) -> tuple[dict[str, set[Fact]], dict[str, set[Fact]]]:
        """The asserted facts inserted and retracted since the last evaluation, per predicate."""
        base_ins: dict[str, set[Fact]] = {}
        base_del: dict[str, set[Fact]] = {}
        for pred, toggled in self._toggled.items():
            base = self.base[pred]
            ins = {f for f in toggled if f in base}
            if ins:
                base_ins[pred] = ins
            if len(ins) != len(toggled):
                base_del[pred] = toggled - ins
        return base_ins, base_del

    def _counts(self) -> dict[str, int]:
        return {name: len(rel) for name, rel in sorted(self.relations.items())}

    def _evaluate_incremental(self, changes: Changes) -> None:
        self.stats.mode = "incremental"
        base_ins, base_del = self._base_changes()
        if base_ins and not base_del:
            step = self._compiled_step(frozenset(base_ins))
            if step is not None:
                step(base_ins, changes, self.stats)
                return
        strata = self.analyzed.strata
        due = sorted({self.analyzed.stratum_of[p] for p in (*base_ins, *base_del)})  # a heap: lowest stratum first
        while due:
            i = heapq.heappop(due)
            if due and due[0] == i:
                continue  # queued twice: the second pop handles it
            self._stratum_step(i, changes, base_ins, base_del)
            for predicate in strata[i].predicates:  # what this stratum changed wakes the strata that read it
                if predicate in changes:
                    for reader in self._readers.get(predicate, ()):
                        if reader > i:  # a recursive stratum reads its own predicates: it has run
                            heapq.heappush(due, reader)

    def _compiled_step(self, inserted: frozenset[str]) -> Step | None:
        """The compiled evaluation of an insertion into ``inserted`` (schedule.py), made once the same predicates
        have gained facts ``steps_after`` times before (an engine evaluated once does not pay for compiling); None
        until then, and always when ``steps_after`` is None (the generic loop alone)."""
        step = self._steps.get(inserted)
        if isinstance(step, int):
            if self.steps_after is None or step < self.steps_after:
                self._steps[inserted] = step + 1
                return None
            step = self._steps[inserted] = compile_step(self, inserted)
        elif step is None:
            if len(self._steps) >= _STEPS_KEPT:
                self._steps.clear()
            self._steps[inserted] = 0
            return self._compiled_step(inserted)
        return step

    def _stratum_step(
        self, i: int, changes: Changes, base_ins: dict[str, set[Fact]], base_del: dict[str, set[Fact]] | None = None
    ) -> None:
        """Bring stratum ``i`` up to date with the changes below it (and its own asserted or retracted facts)."""
        stratum, reads, base_del = self.analyzed.strata[i], self._reads[i], base_del or {}
        if stratum.aggregates and self._groups_kept(i, stratum):
            self._update_groups(stratum, reads, changes)
        elif stratum.aggregates:
            self._recompute(stratum, changes)
        elif not stratum.rules:
            self._base_changed(stratum, changes, base_ins, base_del)
        else:
            self._delete_rederive(stratum, reads, changes, base_ins, base_del)

    # -- aggregating rules, group by group ------------------------------------------------------------
    def _aggregate_all(self, rule: Rule, stratum: Stratum) -> set[Fact]:
        """Every head of an aggregating rule from all its rows; the rows kept by group where the stratum allows."""
        if not self._groupable[self._stratum_number[id(stratum)]]:
            self._grouped.pop(rule.index, None)
            return self._run(rule)
        plan = self._plan(rule, None)
        grouped = self._grouped.get(rule.index) or GroupedRows(plan.rule, plan.row_vars)
        self._grouped.pop(rule.index, None)  # kept only once rebuilt: a failure below leaves it out
        heads: set[Fact] = self._grouped_call(grouped.rebuild, self._execute(plan, raw=True), rule)
        self._grouped[rule.index] = grouped
        return heads

    def _groups_kept(self, number: int, stratum: Stratum) -> bool:
        """Whether the stratum's groups are kept and still all its heads (nobody asserted one of its facts)."""
        return (
            self._groupable[number]
            and all(rule.index in self._grouped for rule in stratum.rules)
            and not any(self.base.get(predicate) for predicate in stratum.predicates)
        )

    def _update_groups(self, stratum: Stratum, reads: set[str], changes: Changes) -> None:
        """An aggregating stratum after its body predicates changed: the rows each change added (seeded from the
        facts that came, in the new state) and removed (seeded from the facts that went, in the old state, then
        checked gone), handed to the groups they belong to; only those groups' heads change."""
        self.stats.strata_updated += 1
        lower = {p: changes[p] for p in reads if p in changes}
        losing = any(dels for _, dels in lower.values()) or any(
            lower[p][INSERTED] for p in self._negated_in(stratum) if p in lower
        )
        for rule in stratum.rules:
            grouped = self._grouped[rule.index]
            grouped.journal = self._journal
            added = self._seeded_rows(rule, stratum, lower, positive=INSERTED, negated=DELETED)
            removed: set[Fact] = set()
            if losing:
                removed = self._rows_lost(rule, stratum, lower)
            inserted, deleted = self._grouped_call(grouped.change, added, rule, removed)
            grouped.journal = None
            relation = self.relations[rule.head.predicate]
            relation.remove(deleted)
            self._insert(rule.head.predicate, inserted)
            if inserted or deleted:
                changes[rule.head.predicate] = (inserted, deleted)

    def _rows_added(self, rule: Rule, rows: set[Fact]) -> tuple[set[Fact], set[Fact]]:
        """The head facts an aggregating rule kept by group gains and loses when ``rows`` begin to hold (the
        compiled step's ``_update_groups`` after insertions alone)."""
        grouped = self._grouped[rule.index]
        grouped.journal = self._journal
        try:
            inserted, deleted = self._grouped_call(grouped.change, rows, rule, ())
        finally:
            grouped.journal = None
        return inserted, deleted

    def _rows_lost(self, rule: Rule, stratum: Stratum, lower: Changes) -> set[Fact]:
        """The aggregating rule's rows that held before the lower strata changed and hold no more: seeded from the
        facts that went (and, under '!', came) in the old state, then checked against the new one."""
        reads = [lit for lit in self._plan(rule, None).rule.body if isinstance(lit, Negation) or (
            isinstance(lit, Atom) and lit.predicate in self.relations)]  # fmt: skip
        if len(reads) == 1 and isinstance(reads[0], Atom):
            # the body reads one relation, the seed itself: its rows are the seed's, whatever the state, and a row
            # names every value of its one fact (a one-atom body's wildcards are named), so a row that went is gone
            return self._seeded_rows(rule, stratum, lower, positive=DELETED, negated=INSERTED)
        for pred, (ins, dels) in lower.items():  # the old state, for what held before
            self.relations[pred].remove(ins)
            self.relations[pred].add(dels)
        try:
            removed = self._seeded_rows(rule, stratum, lower, positive=DELETED, negated=INSERTED)
        finally:
            for pred, (ins, dels) in lower.items():
                self.relations[pred].remove(dels)
                self.relations[pred].add(ins)
        if removed:  # rows another derivation still gives (a wildcard's other value) stay
            removed -= self._execute(self._row_check(rule), removed)
        return removed

    def _seeded_rows(self, rule: Rule, stratum: Stratum, lower: Changes, positive: int, negated: int) -> set[Fact]:
        """The aggregating rule's body rows that use a fact of ``lower[p][positive]`` or, under '!', of
        ``lower[p][negated]``."""
        rows: set[Fact] = set()
        for seeded_rule, _, predicate, is_negation, plan in self._stratum_seeds(stratum):
            change = lower.get(predicate) if seeded_rule is rule else None
            facts = change[negated if is_negation else positive] if change is not None else None
            if facts:
                rows |= self._execute(plan, facts, raw=True)
        return rows

    def _row_check(self, rule: Rule) -> CompiledRule:
        """A plan that keeps the given body rows of an aggregating rule that still hold."""
        key = (rule.index, Seed(SEED_HEAD, -2))
        plan = self._compiled.get(key)
        if plan is None:
            aggregating = self._plan(rule, None)
            body = aggregating.rule.body  # wildcards of a one-atom body are named there, as in its rows
            head = Atom("__row", tuple(Var(name, rule.head.pos) for name in aggregating.row_vars), rule.head.pos)
            check = Rule(rule.index, Clause(head, body, None, rule.clause.pos))
            plan = self._compiled[key] = compile_rule(check, Seed(SEED_HEAD), self.predicates)
        return plan

    def _grouped_call(self, function: Callable[..., Any], rows: Any, rule: Rule, *more: Any) -> Any:
        """A GroupedRows step, its reducers' errors reported as the clause's, like a whole-rule evaluation's."""
        try:
            return function(rows, *more)
        except ValueLimitError as exc:
            raise EvaluationLimitError(f"{exc} (in the clause {rule.clause})", rule.clause.pos) from None
        except BuiltinError as exc:
            raise EvaluationError(f"{exc} (in the clause {rule.clause})", rule.clause.pos) from None

    def _negated_in(self, stratum: Stratum) -> set[str]:
        negated = self._negated.get(id(stratum))
        if negated is None:
            negated = self._negated[id(stratum)] = {
                lit.atom.predicate for rule in stratum.rules for lit in rule.body if isinstance(lit, Negation)
            }
        return negated

    def _stratum_seeds(self, stratum: Stratum) -> list[SeedPlan]:
        """(rule, literal, predicate, negated?, the rule's plan seeded there) for every stored atom of the stratum's
        rule bodies, compiled once: a decision runs a dozen of these, and finding each plan cost more than running
        it."""
        seeds = self._seeds.get(id(stratum))
        if seeds is None:
            seeds = self._seeds[id(stratum)] = [
                (rule, i, lit.atom.predicate, True, self._plan(rule, Seed(SEED_NEGATIVE, i)))
                if isinstance(lit, Negation)
                else (rule, i, lit.predicate, False, self._plan(rule, Seed(SEED_POSITIVE, i)))
                for rule in stratum.rules
                for i, lit in enumerate(rule.body)
                if isinstance(lit, Negation) or (isinstance(lit, Atom) and lit.predicate in self.relations)
            ]
        return seeds

    def _seeds_reading(self, stratum: Stratum) -> dict[str, list[SeedPlan]]:
        """The stratum's seeded plans by the predicate they are seeded from: a change to a few predicates looks at
        their plans alone (a guard policy's stratum has ~100 seeds, an attempt's facts touch a handful)."""
        grouped = self._seeds_by_predicate.get(id(stratum))
        if grouped is None:
            grouped = self._seeds_by_predicate[id(stratum)] = {}
            for seed in self._stratum_seeds(stratum):
                grouped.setdefault(seed[2], []).append(seed)
        return grouped

    def _members(self, stratum: Stratum) -> frozenset[str]:
        members = self._member_sets.get(id(stratum))
        if members is None:
            members = self._member_sets[id(stratum)] = frozenset(stratum.predicates)
        return members

    def _stratum_reads(self, stratum: Stratum) -> set[str]:
        return {p for rule in stratum.rules for p, _ in rule.body_predicates() if p in self.relations}

    def _base_changed(
        self, stratum: Stratum, changes: Changes, base_ins: dict[str, set[Fact]], base_del: dict[str, set[Fact]]
    ) -> None:
        """A stratum without rules holds its asserted facts alone: they change as the base did."""
        self.stats.strata_updated += 1
        for pred in stratum.predicates:
            inserted, deleted = base_ins.get(pred, set()), base_del.get(pred, set())
            if deleted:
                self.relations[pred].remove(deleted)
            if inserted:
                self._insert(pred, inserted)
            if inserted or deleted:
                changes[pred] = (inserted, deleted)

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
        members = self._members(stratum)
        lower = {p: change for p, change in changes.items() if p in reads}  # changes are few, reads may be many
        if not self._may_lose(stratum, lower, members, base_del):
            # only insertions reach this stratum (a supposed call's facts, new observations): no DRed pass
            for pred, facts in self._insert_new(stratum, lower, members, base_ins, {}).items():
                if facts:
                    changes[pred] = (facts, set())
            return
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

    def _may_lose(
        self, stratum: Stratum, lower: Changes, members: frozenset[str], base_del: dict[str, set[Fact]]
    ) -> bool:
        """Whether any fact of the stratum can lose a derivation: a retracted base fact of its own, a lower fact
        gone, or a lower fact inserted where one of its rules negates it."""
        if base_del:
            for pred in members:
                if base_del.get(pred):
                    return True
        for _, dels in lower.values():
            if dels:
                return True
        seeds = self._seeds_reading(stratum)
        for predicate, change in lower.items():
            inserted = change[INSERTED]
            if inserted:
                for rule, i, _, is_negation, _ in seeds.get(predicate, ()):
                    if is_negation and self._blocks_stored(rule, i, inserted):
                        return True
        return False

    def _blocks_stored(self, rule: Rule, literal: int, inserted: set[Fact]) -> bool:
        """Whether a fact inserted under the rule's ``!`` at ``literal`` may take away a stored head: only a head
        carrying the inserted fact's values where the two share a variable can, so when the rule's head relation
        holds none with those values, nothing is lost (a new call's facts never block an older call's verdict)."""
        shared = self._shared(rule, literal)
        if not shared:
            return True
        index = self.relations[rule.head.predicate].index(tuple(column for _, column in shared))
        if len(shared) == 1:
            [(position, _)] = shared
            return any(fact[position] in index for fact in inserted)
        return any(tuple(fact[position] for position, _ in shared) in index for fact in inserted)

    def _shared(self, rule: Rule, literal: int) -> tuple[tuple[int, int], ...]:
        """(column of the negated atom, column of the head) for each variable the rule's ``!`` at ``literal`` shares
        with its head."""
        shared = self._shared_columns.get((rule.index, literal))
        if shared is None:
            negated = rule.body[literal]
            assert isinstance(negated, Negation)
            head = {arg.name: column for column, arg in enumerate(rule.head.args) if isinstance(arg, Var)}
            shared = self._shared_columns[(rule.index, literal)] = tuple(
                (position, head[arg.name])
                for position, arg in enumerate(negated.atom.args)
                if isinstance(arg, Var) and arg.name != "_" and arg.name in head
            )
        return shared

    def _overdelete(
        self, stratum: Stratum, lower: Changes, members: frozenset[str], base_del: dict[str, set[Fact]]
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
            for rule, _, predicate, is_negation, plan in self._stratum_seeds(stratum):
                if not is_negation and frontier.get(predicate):
                    self._merge(heads, rule, self._execute(plan, frontier[predicate]))
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
        members: frozenset[str],
        base_ins: dict[str, set[Fact]],
        delta: dict[str, set[Fact]],
    ) -> dict[str, set[Fact]]:
        """Step 4: insert the re-derived facts, new base facts and what the lower strata's insertions (and
        deletions under '!') derive, up to the fixpoint; returns everything inserted."""
        for pred in members:
            asserted = base_ins.get(pred)
            fresh = asserted - self.relations[pred].facts if asserted else None
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
        seeds = self._seeds_reading(stratum)
        for predicate, change in lower.items():
            for rule, _, _, is_negation, plan in seeds.get(predicate, ()):
                facts = change[negated if is_negation else positive]
                if facts:
                    self._merge(heads, rule, self._execute(plan, facts))

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
