"""The evaluator's face: a program's facts in, its derived facts out — from scratch, incrementally after a change, or
for the length of a supposition.

The work is done by its parts, each in its own module over ``core.EngineCore``: ``full.py`` (semi-naive fixpoints
stratum by stratum), ``incremental.py`` (delete-rederive after a change, where a fact inserted into a negated
predicate counts as a deletion and a retracted one as an insertion; the compiled steps of ``schedule.py`` after
insertions alone), ``kept.py`` (aggregates group by group), ``plans.py`` (the plans each part runs). The result is
always the one evaluating from scratch gives.
"""

from __future__ import annotations

import gc
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from itertools import filterfalse
from typing import Any

from . import fundeps
from .analysis import AnalyzedProgram, PredicateInfo, Rule, bounds_problem
from .ast import Apply, Const, Term, Var
from .builtins import FUNCTIONS, BuiltinError
from .codegen import DEADLINE
from .core import Changes, Rebuilt, Stats
from .errors import FactError
from .grouped import GroupedRows, Journal
from .incremental import Incremental
from .parser import parse_atom
from .plans import ExternalError, PlanBook
from .program import Program
from .schedule import Step
from .storage import Fact, Relation, undo_changes
from .type_bounds import fits_any
from .values import sort_facts, to_value

External = Callable[..., Any]


class Engine(Incremental):
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
        # how many asserted facts there are, kept as they come and go: a kernel bounds it before every supposition
        # (the decision path's every call), and summing ~140 sets cost a microsecond of a 40 µs decision
        self.base_count = sum(map(len, self.base.values()))
        self._toggled: dict[str, set[Fact]] = {}
        self.book = PlanBook(self.analyzed, self.relations, watched=time_limit is not None)
        heads = [rule.head.predicate for rule in self.analyzed.rules]
        single = {predicate for predicate in heads if heads.count(predicate) == 1}
        self._grouped = {}
        self._groupable = [
            all(GroupedRows.eligible(rule, single) for rule in stratum.rules)
            and all(not self.base.get(p) for p in stratum.predicates)
            for stratum in self.analyzed.strata
        ]  # strata of aggregating rules alone whose heads have no asserted facts: maintained group by group
        self._journal = None
        self._needs_full = True
        self._created = 0
        self.stats = Stats()
        self._shapes: dict[str, tuple[int, Callable[[Fact], bool] | None]] = {}  # per predicate, see _shape
        self._fundeps = {name: info.fundeps for name, info in self.predicates.items()
                         if info.fundeps and name in self.relations}  # fmt: skip
        self._steps, self._sightings, self._not_compiled = OrderedDict(), OrderedDict(), set()
        self._compiles, self._compile_seconds, self._compile_longest, self._evaluated = 0, 0.0, 0.0, 0.0
        self.steps_after = 1  # see Incremental._compiled_step (None: no compiled step, the generic loop alone)
        self._rebuilt: Rebuilt = {}  # the open supposition's snapshots of the groups it rebuilt whole
        self._supposed: list[Iterable[str]] = []  # per open supposition, the predicates it changes (see passing)
        # evaluations no supposition records (a full one; one after facts asserted or retracted inside a block):
        # one while a supposition is open voids its record of changes (see _undo_supposed)
        self._unrecorded = 0
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
        self.book.register_external(predicate, _wrap_external(predicate, function, outputs))
        self._steps.clear()  # the compiled steps called the previous function

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
        self.base_count += added
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
        self.base_count -= removed
        return removed

    @property
    def pending(self) -> bool:
        """Whether asserted or retracted facts are waiting for an evaluation."""
        return self._needs_full or any(self._toggled.values())

    def evaluate(self, *, full: bool = False, changes: Changes | None = None) -> Stats:
        """Bring derived facts up to date: incrementally after the first call, unless ``full``. ``changes``, for an
        incremental evaluation, receives what it inserted and deleted per predicate (what ``supposing`` undoes)."""
        recorded: Changes = {} if changes is None else changes

        def run() -> None:
            if changes is None or full or self._needs_full:
                self._unrecorded += 1
            if full or self._needs_full:
                if changes is not None:
                    raise FactError("a full evaluation does not record its changes")
                self._evaluate_full()
            else:
                self._evaluate_incremental(recorded)
            self._check_fundeps(None if self.stats.mode == "full" else recorded)

        stats = self._evaluation(Stats(), run)
        self._toggled = {}
        counts = {name: len(rel) for name, rel in sorted(self.relations.items())} if stats.mode == "full" else None
        stats.counts = (lambda: counts) if counts is not None else self._counts
        return stats

    def _evaluation(self, stats: Stats, run: Callable[..., None], *arguments: Any) -> Stats:
        """``run(*arguments)`` as an evaluation: ``stats`` its record, the time limit its budget, the collector paused
        (it builds tuples that never form cycles); when it fails the store may be half-updated, so the next evaluation
        starts afresh. (Arguments rather than a closure: the decision path runs one per call.)"""
        started = time.perf_counter()
        self._created = 0
        self.stats = stats
        budget = DEADLINE.set([0, time.monotonic() + self.time_limit, self.time_limit]) \
            if self.time_limit is not None else None  # fmt: skip
        collecting = gc.isenabled()  # as gc_paused, inline: the decision path runs this per call
        gc.disable()
        try:
            run(*arguments)
        except BaseException:
            self._needs_full = True
            raise
        finally:
            if collecting:
                gc.enable()
            if budget is not None:
                DEADLINE.reset(budget)
        stats.created = self._created
        stats.seconds = time.perf_counter() - started
        self._evaluated += stats.seconds
        return stats

    def _check_fundeps(self, changes: Changes | None) -> None:
        """The Decls' functional dependencies hold on what this evaluation inserted (``changes``; None: on every
        fact, after a full evaluation) — FunctionalDependencyError naming the clash and the Decl otherwise."""
        for predicate, declared in self._fundeps.items():
            if changes is None:
                fundeps.check(predicate, self.relations[predicate], declared, None)
            elif predicate in changes and changes[predicate][0]:
                fundeps.check(predicate, self.relations[predicate], declared, changes[predicate][0])

    def supposing(self, facts: Mapping[str, Iterable[Iterable[Any]]]) -> Supposition:
        """What the rules derive if ``facts`` (predicate → rows) held, for the length of the ``with`` block; after it
        the engine is exactly as before — the facts and everything derived from them gone, anything they blocked
        back — without a second evaluation: the evaluation's own record of what it changed is undone.

        This is the decision path's core (one tools/call's facts asserted, the verdict read, the facts gone): the
        consequences are derived incrementally from the supposed facts alone, and the retraction costs set
        operations, not a delete-rederive pass. Facts that already held are not supposed (and stay after)."""
        return Supposition(self, facts)

    def _evaluate_supposed(self, added: dict[str, set[Fact]], changes: Changes) -> None:
        """``evaluate(changes=changes)`` after the supposed facts ``added`` (already in the base): their compiled step
        run straight away when there is one — the decision path, without the generic evaluation's set-up."""
        step = self._compiled_step_at_hand(frozenset(added)) if added else None
        if step is None:
            self._toggled = {predicate: set(fresh) for predicate, fresh in added.items()}
            self.evaluate(changes=changes)
            return
        stats = Stats(mode="incremental")
        self._evaluation(stats, self._run_step, step, added, changes)
        stats.counts = self._counts

    def _run_step(self, step: Step, added: dict[str, set[Fact]], changes: Changes) -> None:
        """A compiled step over supposed facts, then the Decls' functional dependencies on what it inserted."""
        step(added, changes, self.stats)
        if self._fundeps:
            self._check_fundeps(changes)

    def _undo_supposed(
        self, added: dict[str, set[Fact]], changes: Changes, outer: Journal | None, outer_rebuilt: Rebuilt,
        unrecorded: int | None = None,
    ) -> None:
        """Put back the state before ``supposing``: its base facts, every derived change it made and the groups of
        the aggregating rules it touched — those it rebuilt whole (it supposed facts of their head) as they were
        before (``outer``, ``outer_rebuilt``: the journal and snapshots of the supposition this one was inside, if
        any). After an evaluation that failed, the derived facts are not put back piece by piece (a failure can leave
        them half-changed): the base is, and the next evaluation starts afresh from it. So after an evaluation the
        block did not record (``unrecorded``: the count of those when it began) — a full one after a supposition
        nested in it failed, or one after facts were asserted or retracted inside it — which changed the relations
        its record of changes refers to."""
        journal, self._journal = self._journal or [], outer
        rebuilt, self._rebuilt = self._rebuilt, outer_rebuilt
        for predicate, fresh in added.items():
            base = self.base[predicate]
            held = len(base)
            base -= fresh
            self.base_count -= held - len(base)  # a supposed fact retracted inside the block was counted out then
            toggled = self._toggled.get(predicate)
            if toggled:  # facts asserted inside the block stay toggled, for the next evaluation
                toggled -= fresh
        if self._needs_full or (unrecorded is not None and unrecorded != self._unrecorded):
            self._needs_full = True
            return
        for index, (kept, groups, heads, sums, _) in rebuilt.items():  # the maps before the rebuild, first
            if kept is None:
                self._grouped.pop(index, None)
            else:
                kept.groups, kept.heads, kept.totals = groups, heads, sums
                self._grouped[index] = kept
        for position in range(len(journal) - 1, -1, -1):  # then each group as it was, in those maps
            grouped, key, rows, head, running = journal[position]
            snapshot = rebuilt.get(grouped.rule.index)
            if snapshot is None or position < snapshot[4]:  # a change to the maps a rebuild threw away: gone with them
                grouped.restore(key, rows, head, running)
        undo_changes(self.relations, changes)  # each relation as it was: what came removed, what went back

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
        if len(bound) == 1:
            [(column, value)] = bound.items()
            return self.lookup_one(predicate, column, value)
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

    def passing(self) -> PassingIndexes:
        """A block whose lookups leave no index behind on the relations the open suppositions change (``with
        engine.passing(): ...``): an explanation of one decision reads them through indexes no evaluation asked for,
        and every later decision would keep those up to date (they held a guard's decision path at 36 µs instead of
        32). Outside a supposition, and on every other relation, indexes stay as usual."""
        return PassingIndexes(self)

    def lookup_one(self, predicate: str, column: int, value: Any) -> list[Fact]:
        """``lookup`` of one column (a decision's verdict by its call): no sorting, no key tuple."""
        relation = self.relations.get(predicate)
        if relation is None:
            raise FactError(f"could not find predicate {predicate}")
        if not 0 <= column < relation.arity:
            raise FactError(f"{predicate} has {relation.arity} arguments: no column {[column]}")
        if self.pending:
            self.evaluate()
        return list(relation.index((column,)).get(value, ()))

    def derivations(self, rule: Rule, fact: Fact, variables: tuple[str, ...]) -> list[Fact]:
        """The values of ``variables`` in each instantiation of ``rule``'s body (over the current facts) that derives
        ``fact``, sorted: what an explanation shows, found from the fact itself rather than by evaluating every
        rule's instantiations (``rule`` has no transform; ``variables`` are its body's)."""
        if self.pending:
            self.evaluate()
        return sort_facts(self.book.execute(self.book.derivation(rule, variables), [fact]))

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
        return [c.code for c in self.book.compiled.values()]

    # -- facts in -----------------------------------------------------------------------------------
    def _arity(self, predicate: str) -> int:
        relation = self.relations.get(predicate)
        if relation is None:
            raise FactError(f"could not find predicate {predicate}")
        return relation.arity

    def _convert(self, predicate: str, rows: Iterable[Iterable[Any]], check_bounds: bool = True) -> list[Fact]:
        arity, fits = self._shapes.get(predicate) or self._shape(predicate)
        if not (check_bounds and self.check_bounds):
            fits = None
        out = []
        for row in rows:
            try:
                fact = tuple([v if type(v) is str else to_value(v) for v in row])  # a string is its own value
            except (TypeError, ValueError) as exc:
                raise FactError(f"bad value in {predicate}{tuple(row)!r}: {exc}") from None
            if len(fact) != arity:
                raise FactError(f"{predicate} has {arity} arguments, got {len(fact)}: {fact!r}")
            if fits is not None and not fits(fact):
                info = self.predicates[predicate]
                raise FactError(bounds_problem(info, fact) or f"{predicate}{fact!r} does not match its bounds")
            out.append(fact)
        return out

    def _shape(self, predicate: str) -> tuple[int, Callable[[Fact], bool] | None]:
        """The predicate's arity and its declared bounds as one compiled test (None: nothing to check), made once per
        engine (a decision converts two or three predicates' facts)."""
        arity, info = self._arity(predicate), self.predicates[predicate]
        bounds = info.decl.bounds if info.decl is not None else ()
        usable = bounds and all(len(block) == info.arity for block in bounds)  # as bounds_problem: else unchecked
        shape = self._shapes[predicate] = (arity, fits_any(bounds) if usable else None)
        return shape


def _wrap_external(predicate: str, function: External, outputs: int) -> Callable[..., list[Fact]]:
    def call(*inputs: Any) -> list[Fact]:
        try:
            result = function(*inputs)
        except Exception as exc:  # a user's callable: report it, naming the predicate
            raise ExternalError(f"external predicate {predicate} raised {type(exc).__name__}: {exc}") from exc
        if isinstance(result, bool):
            if outputs:
                raise ExternalError(f"external predicate {predicate} returned a bool, not rows of {outputs} values")
            return [()] if result else []
        rows = []
        try:
            for row in result:
                row = tuple(row) if isinstance(row, tuple | list) else (row,)
                if len(row) != outputs:
                    raise ExternalError(
                        f"external predicate {predicate} returned {len(row)} values, expected {outputs}"
                    )
                rows.append(tuple(to_value(v) for v in row))
        except ExternalError:
            raise
        except (TypeError, ValueError) as exc:
            raise ExternalError(f"external predicate {predicate} returned a bad value: {exc}") from None
        except Exception as exc:  # raised while its rows were read (a generator): the user's callable's failure too
            raise ExternalError(f"external predicate {predicate} raised {type(exc).__name__}: {exc}") from exc
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


class PassingIndexes:
    """``Engine.passing``'s block: the index keys the changed relations had on entry, and on exit any other dropped
    (a plan reads an index through ``Relation.index`` each time it runs, so a dropped one is built again if asked)."""

    __slots__ = ("_engine", "_had")

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __enter__(self) -> None:
        relations = self._engine.relations
        changed = {predicate for keys in self._engine._supposed for predicate in keys}
        self._had = {predicate: set(relations[predicate].indexes) for predicate in changed}

    def __exit__(self, *exc: object) -> None:
        relations = self._engine.relations
        for predicate, had in self._had.items():
            indexes = relations[predicate].indexes
            for columns in [columns for columns in indexes if columns not in had]:
                del indexes[columns]


class Supposition:
    """``Engine.supposing``'s block: the facts supposed and their consequences derived on entry, all of it undone on
    exit. A class rather than a generator: the decision path enters one per call, and a generator's context manager
    cost it about a microsecond."""

    __slots__ = ("_added", "_changes", "_engine", "_facts", "_outer", "_outer_rebuilt", "_unrecorded")

    def __init__(self, engine: Engine, facts: Mapping[str, Iterable[Iterable[Any]]]) -> None:
        self._engine, self._facts = engine, facts

    def __enter__(self) -> Stats:
        engine = self._engine
        if engine.pending:
            engine.evaluate()
        added: dict[str, set[Fact]] = {}  # literals, not the aliases called: half a microsecond a decision
        changes: Changes = {}
        self._added, self._changes = added, changes
        self._outer, engine._journal = engine._journal, []  # a supposition inside another keeps the outer journal
        self._outer_rebuilt, engine._rebuilt = engine._rebuilt, {}  # and its groups' snapshots
        try:
            for predicate, rows in self._facts.items():
                converted = engine._convert(predicate, rows)  # first: an unknown predicate is a FactError naming it
                base = engine.base[predicate]
                fresh = set(filterfalse(base.__contains__, converted))  # facts held already stay after the block
                if fresh:
                    base |= fresh
                    added[predicate] = fresh
                    engine.base_count += len(fresh)
            engine._evaluate_supposed(added, changes)
        except BaseException:  # an evaluation that failed half-way: what it derived so far is undone too
            engine._undo_supposed(added, changes, self._outer, self._outer_rebuilt)
            raise
        engine._supposed.append(changes.keys())  # a view: what the step changed, base facts included
        self._unrecorded = engine._unrecorded
        return engine.stats

    def __exit__(self, *exc: object) -> None:
        self._engine._supposed.pop()
        self._engine._undo_supposed(self._added, self._changes, self._outer, self._outer_rebuilt, self._unrecorded)
