"""Aggregates kept group by group: after a change, the rows it added and removed (found by seeding the rule from the
changed facts) go to the groups they belong to, and only those groups get a new head (``grouped.GroupedRows`` keeps
the rows)."""

from __future__ import annotations

from .analysis import Rule, Stratum
from .ast import Atom, Negation
from .core import DELETED, INSERTED, Changes, EngineCore
from .storage import Fact


class KeptGroups(EngineCore):
    """The aggregating strata whose groups are kept."""

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
            lower[p][INSERTED] for p in self.book.of(stratum).negated if p in lower
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
            inserted, deleted = self._grouped_call(grouped.gained, rows, rule)
        finally:
            grouped.journal = None
        return inserted, deleted

    def _rows_lost(self, rule: Rule, stratum: Stratum, lower: Changes) -> set[Fact]:
        """The aggregating rule's rows that held before the lower strata changed and hold no more: seeded from the
        facts that went (and, under '!', came) in the old state, then checked against the new one."""
        reads = [lit for lit in self.book.plan(rule, None).rule.body if isinstance(lit, Negation) or (
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
            removed -= self.book.execute(self.book.row_check(rule), removed)
        return removed

    def _seeded_rows(self, rule: Rule, stratum: Stratum, lower: Changes, positive: int, negated: int) -> set[Fact]:
        """The aggregating rule's body rows that use a fact of ``lower[p][positive]`` or, under '!', of
        ``lower[p][negated]``."""
        rows: set[Fact] = set()
        for seeded_rule, _, predicate, is_negation, plan in self.book.of(stratum).seeds:
            change = lower.get(predicate) if seeded_rule is rule else None
            facts = change[negated if is_negation else positive] if change is not None else None
            if facts:
                rows |= self.book.execute(plan, facts, raw=True)
        return rows
