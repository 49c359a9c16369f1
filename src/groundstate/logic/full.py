"""Evaluation from scratch: every stratum in order, each rule once and recursive ones to their fixpoint
(semi-naive: a recursive rule runs again only from the facts new since its last round)."""

from __future__ import annotations

from .analysis import Rule, Stratum
from .core import Changes, EngineCore
from .grouped import GroupedRows
from .storage import Fact


class FullEvaluation(EngineCore):
    """The from-scratch half of the engine, and the fixpoint the incremental half shares."""

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
                self._collect(delta, rule.head.predicate, self.book.run(rule))
        self._insert_delta(delta)
        self._fixpoint(stratum, delta)
        if changes is not None:
            for pred, before in old.items():
                after = self.relations[pred].facts
                ins, dels = after - before, before - after
                if ins or dels:
                    changes[pred] = (ins, dels)

    def _fixpoint(self, stratum: Stratum, delta: dict[str, set[Fact]], track: bool = False) -> dict[str, set[Fact]]:
        """Semi-naive iteration from ``delta`` (already inserted); with ``track``, returns everything inserted (for a
        stratum that does not recurse, ``delta`` itself: nothing more is derived)."""
        if not stratum.recursive:
            return delta if track else {}
        inserted = {p: set(f) for p, f in delta.items()} if track else {}
        variants = self.book.of(stratum).variants
        while any(delta.values()):
            self.stats.iterations += 1
            new: dict[str, set[Fact]] = {}
            for body_predicate, head_predicate, plan in variants:
                facts = delta.get(body_predicate)
                if facts:
                    self._collect(new, head_predicate, self.book.execute(plan, facts))
            self._insert_delta(new)
            if track:
                for pred, facts in new.items():
                    inserted.setdefault(pred, set()).update(facts)
            delta = new
        return inserted

    def _aggregate_all(self, rule: Rule, stratum: Stratum) -> set[Fact]:
        """Every head of an aggregating rule from all its rows; the rows kept by group where the stratum allows."""
        if not self._groupable[stratum.number]:
            self._grouped.pop(rule.index, None)
            return self.book.run(rule)
        plan = self.book.plan(rule, None)
        kept = self._grouped.get(rule.index)
        if self._journal is not None and rule.index not in self._rebuilt:  # inside a supposition: put back after it
            self._rebuilt[rule.index] = (kept, kept.groups, kept.heads, kept.totals, len(self._journal)) \
                if kept is not None else (None, {}, {}, {}, len(self._journal))  # fmt: skip
        grouped = kept or GroupedRows(plan.rule, plan.row_vars)
        self._grouped.pop(rule.index, None)  # kept only once rebuilt: a failure below leaves it out
        heads: set[Fact] = self._grouped_call(grouped.rebuild, self.book.execute(plan, raw=True), rule)
        self._grouped[rule.index] = grouped
        return heads
