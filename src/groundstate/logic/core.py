"""What every part of the evaluation shares: the relations, the asserted facts, the plan book, the statistics, and
the few operations all of them use (inserting derived facts against the engine's limit, collecting new heads).

The engine is put together from its parts (``Engine`` in ``engine.py``): ``full.py`` evaluates from scratch,
``kept.py`` keeps aggregates group by group, ``incremental.py`` maintains the rest after a change (delete-rederive,
and the compiled steps of ``schedule.py``); each is a class over this core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .analysis import AnalyzedProgram, PredicateInfo, Rule
from .builtins import BuiltinError, ValueLimitError
from .errors import EvaluationError, EvaluationLimitError
from .grouped import GroupedRows, Journal
from .plans import PlanBook
from .storage import Fact, Relation

Changes = dict[str, tuple[set[Fact], set[Fact]]]  # predicate -> (inserted, deleted)
INSERTED, DELETED = 0, 1
# per aggregating rule (its index) a supposition rebuilt whole: its kept groups before (None: it had none) — the
# object and its three maps — and the length of the supposition's journal when it was rebuilt
Rebuilt = dict[int, "tuple[GroupedRows | None, dict[Any, Any], dict[Any, Any], dict[Any, Any], int]"]


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


class EngineCore:
    """The state an engine's evaluation works on (set up by ``Engine.__init__``)."""

    analyzed: AnalyzedProgram
    predicates: dict[str, PredicateInfo]
    relations: dict[str, Relation]
    base: dict[str, set[Fact]]
    base_count: int
    book: PlanBook
    stats: Stats
    created_fact_limit: int | None
    _created: int
    _toggled: dict[str, set[Fact]]
    _grouped: dict[int, GroupedRows]  # per aggregating rule kept by group (its index), once evaluated
    _groupable: list[bool]  # per stratum: whether its aggregates are kept group by group
    _journal: Journal | None  # while a supposition is open: each group's state before it changed
    _rebuilt: Rebuilt  # the open supposition's snapshots of the groups it rebuilt whole (see Engine._undo_supposed)

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

    def _collect(self, delta: dict[str, set[Fact]], predicate: str, heads: set[Fact]) -> None:
        fresh = heads - self.relations[predicate].facts
        bucket = delta.get(predicate)
        if bucket is None:
            delta[predicate] = fresh
        else:
            bucket |= fresh

    def _insert_delta(self, delta: dict[str, set[Fact]]) -> None:
        for pred, new in delta.items():
            self._insert(pred, new)

    @staticmethod
    def _merge(heads: dict[str, set[Fact]], rule: Rule, found: set[Fact]) -> None:
        if found:
            heads.setdefault(rule.head.predicate, set()).update(found)

    def _counts(self) -> dict[str, int]:
        return {name: len(rel) for name, rel in sorted(self.relations.items())}

    def _grouped_call(self, function: Callable[..., Any], rows: Any, rule: Rule, *more: Any) -> Any:
        """A GroupedRows step, its reducers' errors reported as the clause's, like a whole-rule evaluation's."""
        try:
            return function(rows, *more)
        except ValueLimitError as exc:
            raise EvaluationLimitError(f"{exc} (in the clause {rule.clause})", rule.clause.pos) from None
        except BuiltinError as exc:
            raise EvaluationError(f"{exc} (in the clause {rule.clause})", rule.clause.pos) from None
