"""An engine's plan book: every plan its evaluation runs, compiled once, and what each needs in this engine.

A plan (``codegen.CompiledRule``) is shared by every engine of a program; what it reads is not: its relations and
external functions are this engine's. The book keeps, per plan, its inputs resolved against this engine, and per
stratum (``StratumPlans``) the plans seeded from each of its body atoms, by the predicate that seeds them — what
delete-rederive, the aggregates kept by group and the compiled steps look up on every evaluation. Everything is made
on first use: an engine evaluated once compiles only the plans it ran.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any, NoReturn

from ..errors import GroundstateError
from .aggregation import aggregate
from .analysis import AnalyzedProgram, PredicateInfo, Rule, Stratum
from .ast import Atom, Clause, Negation, Var
from .builtins import BuiltinError, ValueLimitError
from .codegen import CALL, INDEX, SEED, CompiledRule, compile_rule
from .errors import EvaluationError, EvaluationLimitError
from .planner import SEED_HEAD, SEED_NEGATIVE, SEED_POSITIVE, Seed
from .storage import Fact, Relation

SeedPlan = tuple[Rule, int, str, bool, CompiledRule]  # rule, body literal, its predicate, negated?, seeded plan
Input = tuple[str, Any, tuple[int, ...]]  # a plan's source here: its kind, the relation or function, index columns


class ExternalError(GroundstateError):
    """A user's external predicate failed; re-raised as an EvaluationError naming the predicate."""


class StratumPlans:
    """One stratum's seeded plans and what its rules read, made on first use."""

    def __init__(self, book: PlanBook, stratum: Stratum) -> None:
        self.book = book
        self.stratum = stratum
        self.members = frozenset(stratum.predicates)
        self.reads = {p for rule in stratum.rules for p, _ in rule.body_predicates() if p in book.relations}

    @cached_property
    def seeds(self) -> list[SeedPlan]:
        """(rule, literal, predicate, negated?, the rule's plan seeded there) for every stored atom of the stratum's
        rule bodies, compiled once: a decision runs a dozen of these, and finding each plan cost more than running
        it."""
        plan = self.book.plan
        return [
            (rule, i, lit.atom.predicate, True, plan(rule, Seed(SEED_NEGATIVE, i)))
            if isinstance(lit, Negation)
            else (rule, i, lit.predicate, False, plan(rule, Seed(SEED_POSITIVE, i)))
            for rule in self.stratum.rules
            for i, lit in enumerate(rule.body)
            if isinstance(lit, Negation) or (isinstance(lit, Atom) and lit.predicate in self.book.relations)
        ]

    @cached_property
    def seeds_by_predicate(self) -> dict[str, list[SeedPlan]]:
        """The seeded plans by the predicate they are seeded from: a change to a few predicates looks at their plans
        alone (a guard policy's stratum has ~100 seeds, an attempt's facts touch a handful)."""
        grouped: dict[str, list[SeedPlan]] = {}
        for seed in self.seeds:
            grouped.setdefault(seed[2], []).append(seed)
        return grouped

    @cached_property
    def negated(self) -> set[str]:
        """The predicates the stratum's rules negate."""
        return {lit.atom.predicate for rule in self.stratum.rules for lit in rule.body if isinstance(lit, Negation)}

    @cached_property
    def variants(self) -> list[tuple[str, str, CompiledRule]]:
        """(body predicate, head predicate, plan seeded from that body atom) for every recursive atom."""
        return [
            (predicate, rule.head.predicate, plan)
            for rule, _, predicate, is_negation, plan in self.seeds
            if not is_negation and not rule.aggregates and predicate in self.members
        ]


class PlanBook:
    """The plans of one engine's program, and what each needs from this engine."""

    caught = (ValueLimitError, BuiltinError, ExternalError)  # what plan_failed reports

    def __init__(
        self, analyzed: AnalyzedProgram, relations: dict[str, Relation], watched: bool
    ) -> None:
        self.predicates: dict[str, PredicateInfo] = analyzed.predicates
        self.relations = relations
        self.watched = watched
        self.compiled: dict[tuple[int, Seed | None], CompiledRule] = \
            analyzed.watched_plans if watched else analyzed.plans  # fmt: skip
        self.externals: dict[str, Callable[..., list[Fact]]] = {}
        self._inputs: dict[CompiledRule, list[Input]] = {}  # per plan, see execute
        self._derivations: dict[tuple[int, tuple[str, ...]], CompiledRule] = {}  # see derivation
        self._shared: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}  # see shared
        self.strata = [StratumPlans(self, stratum) for stratum in analyzed.strata]
        self.readers: dict[str, list[int]] = {}  # predicate -> the strata whose rules read it
        for number, plans in enumerate(self.strata):
            for predicate in plans.reads:
                self.readers.setdefault(predicate, []).append(number)

    def of(self, stratum: Stratum) -> StratumPlans:
        return self.strata[stratum.number]

    def plan(self, rule: Rule, seed: Seed | None) -> CompiledRule:
        key = (rule.index, seed)
        plan = self.compiled.get(key)
        if plan is None:
            plan = compile_rule(rule, seed, self.predicates, watched=self.watched)
            self.compiled[key] = plan
        return plan

    def register_external(self, predicate: str, function: Callable[..., list[Fact]]) -> None:
        self.externals[predicate] = function
        self._inputs.clear()  # plans resolved the previous function

    def run(self, rule: Rule, seed: Seed | None = None, seed_facts: Any = (), raw: bool = False) -> set[Fact]:
        return self.execute(self.plan(rule, seed), seed_facts, raw)

    def execute(self, plan: CompiledRule, seed_facts: Any = (), raw: bool = False) -> set[Fact]:
        """The plan's head facts (``raw``: an aggregating rule's body rows, before grouping)."""
        inputs = self._inputs.get(plan)
        if inputs is None:
            inputs = self._inputs[plan] = [self.input(plan, source) for source in plan.sources]
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
        except self.caught as exc:
            self.plan_failed(rule, exc)
        return result

    @staticmethod
    def plan_failed(rule: Rule, exc: Exception) -> NoReturn:
        """A built-in's or an external's failure in a rule, reported as the clause's (a limit as a limit)."""
        kind = EvaluationLimitError if isinstance(exc, ValueLimitError) else EvaluationError
        raise kind(f"{exc} (in the clause {rule.clause})", rule.clause.pos) from None

    def input(self, plan: CompiledRule, source: Any) -> Input:
        """Where a plan's source comes from in this engine: its relation (facts or an index) or external."""
        if source.kind == CALL:
            return CALL, self.external(plan, source.predicate), ()
        if source.kind == SEED:
            return SEED, None, ()
        return source.kind, self.relations[source.predicate], source.columns

    def external(self, plan: CompiledRule, predicate: str) -> Callable[..., list[Fact]]:
        """The registered function of an external predicate a plan calls."""
        fn = self.externals.get(predicate)
        if fn is None:
            raise EvaluationError(f"external predicate {predicate} has no registered function", plan.rule.clause.pos)
        return fn

    def row_check(self, rule: Rule) -> CompiledRule:
        """A plan that keeps the given body rows of an aggregating rule that still hold."""
        key = (rule.index, Seed(SEED_HEAD, -2))
        plan = self.compiled.get(key)
        if plan is None:
            aggregating = self.plan(rule, None)
            body = aggregating.rule.body  # wildcards of a one-atom body are named there, as in its rows
            head = Atom("__row", tuple(Var(name, rule.head.pos) for name in aggregating.row_vars), rule.head.pos)
            check = Rule(rule.index, Clause(head, body, None, rule.clause.pos))
            plan = self.compiled[key] = compile_rule(check, Seed(SEED_HEAD), self.predicates)
        return plan

    def derivation(self, rule: Rule, variables: tuple[str, ...]) -> CompiledRule:
        """A plan yielding ``variables`` for each instantiation of ``rule``'s body that derives the given head."""
        key = (rule.index, variables)
        plan = self._derivations.get(key)
        if plan is None:
            terms = tuple(Var(name, rule.head.pos) for name in variables)
            plan = self._derivations[key] = compile_rule(rule, Seed(SEED_HEAD), self.predicates, output=terms)
        return plan

    def shared(self, rule: Rule, literal: int) -> tuple[tuple[int, int], ...]:
        """(column of the negated atom, column of the head) for each variable the rule's ``!`` at ``literal`` shares
        with its head."""
        shared = self._shared.get((rule.index, literal))
        if shared is None:
            negated = rule.body[literal]
            assert isinstance(negated, Negation)
            head = {arg.name: column for column, arg in enumerate(rule.head.args) if isinstance(arg, Var)}
            shared = self._shared[(rule.index, literal)] = tuple(
                (position, head[arg.name])
                for position, arg in enumerate(negated.atom.args)
                if isinstance(arg, Var) and arg.name != "_" and arg.name in head
            )
        return shared
