"""Incremental maintenance after asserted and retracted facts: the strata a change reaches, lowest first, each by
delete-rederive (over-delete what may have lost a derivation, re-derive what still holds, insert what the change
adds — a fact inserted under a rule's ``!`` counting as a deletion and a retracted one as an insertion); a stratum of
aggregates kept by group hands its rows to ``kept.py``, any other aggregating stratum is recomputed. After
insertions alone, the same work runs as one compiled step per set of inserted predicates (``schedule.py``)."""

from __future__ import annotations

import heapq
import time
from collections import OrderedDict

from .analysis import Rule, Stratum
from .core import DELETED, INSERTED, Changes
from .full import FullEvaluation
from .kept import KeptGroups
from .planner import SEED_HEAD, Seed
from .schedule import Step, compile_step
from .storage import Fact

STEPS_KEPT = 256  # compiled incremental steps an engine keeps (one per set of inserted predicates seen twice)
COMPILE_ALLOWANCE, COMPILE_SHARE = 0.05, 0.1  # compiling may take 50 ms, then a tenth of the time spent evaluating


class Incremental(FullEvaluation, KeptGroups):
    """The incremental half of the engine."""

    _steps: OrderedDict[frozenset[str], Step]  # see _compiled_step
    _sightings: OrderedDict[frozenset[str], int]  # how often each set of predicates was seen, not yet compiled
    _not_compiled: set[frozenset[str]]  # sets whose step compile_step declined
    _compiles: int  # steps compiled so far
    _compile_seconds: float  # the time they took
    _compile_longest: float  # the longest one
    _evaluated: float  # seconds spent evaluating so far (see _compiled_step)
    time_limit: float | None
    steps_after: int | None  # see _compiled_step

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
                    for reader in self.book.readers.get(predicate, ()):
                        if reader > i:  # a recursive stratum reads its own predicates: it has run
                            heapq.heappush(due, reader)

    def _compiled_step(self, inserted: frozenset[str]) -> Step | None:
        """The compiled evaluation of an insertion into ``inserted`` (schedule.py), made once the same predicates
        have gained facts ``steps_after`` times before (an engine evaluated once does not pay for compiling); None
        until then, when compiling does not pay (``compile_step``), for an engine with a time limit (compiling is
        not counted against it) and always when ``steps_after`` is None.

        The steps are kept least recently used first, at most ``STEPS_KEPT``; how often each set was seen, for
        ``STEPS_KEPT × 16`` sets. The time spent compiling stays within ``COMPILE_ALLOWANCE`` seconds plus
        ``COMPILE_SHARE`` of the time spent evaluating: a stream of ever-new sets of predicates (a client choosing
        which facts its calls produce) cannot make evaluations compile more than that."""
        step = self._steps.get(inserted)
        if step is not None:
            self._steps.move_to_end(inserted)
            return step if self.steps_after is not None else None
        if self.steps_after is None or self.time_limit is not None or inserted in self._not_compiled:
            return None
        seen = self._sightings.pop(inserted, 0)
        if seen < self.steps_after or self._compile_seconds > COMPILE_ALLOWANCE + COMPILE_SHARE * self._evaluated:
            self._sightings[inserted] = seen + 1
            if len(self._sightings) > STEPS_KEPT * 16:
                self._sightings.popitem(last=False)
            return None
        self._compiles += 1
        started = time.perf_counter()
        step = compile_step(self, inserted)
        took = time.perf_counter() - started
        self._compile_seconds += took
        self._compile_longest = max(self._compile_longest, took)
        if step is None:
            self._not_compiled.add(inserted)
            return None
        self._steps[inserted] = step
        if len(self._steps) > STEPS_KEPT:
            self._steps.popitem(last=False)
        return step

    def _compiled_step_at_hand(self, inserted: frozenset[str]) -> Step | None:
        """The compiled step of ``inserted`` if there is one (nothing counted: ``evaluate`` counts)."""
        step = self._steps.get(inserted) if self.steps_after is not None and self.time_limit is None else None
        if step is not None:
            self._steps.move_to_end(inserted)
        return step

    def _stratum_step(
        self, i: int, changes: Changes, base_ins: dict[str, set[Fact]], base_del: dict[str, set[Fact]] | None = None
    ) -> None:
        """Bring stratum ``i`` up to date with the changes below it (and its own asserted or retracted facts)."""
        stratum, reads, base_del = self.analyzed.strata[i], self.book.strata[i].reads, base_del or {}
        own = any(p in base_ins or p in base_del for p in stratum.predicates)  # asserted or retracted facts of its own
        if stratum.aggregates and not own and self._groups_kept(i, stratum):
            self._update_groups(stratum, reads, changes)
        elif stratum.aggregates:
            self._recompute(stratum, changes)
        elif not stratum.rules:
            self._base_changed(stratum, changes, base_ins, base_del)
        else:
            self._delete_rederive(stratum, reads, changes, base_ins, base_del)

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
        members = self.book.of(stratum).members
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
        seeds = self.book.of(stratum).seeds_by_predicate
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
        shared = self.book.shared(rule, literal)
        if not shared:
            return True
        index = self.relations[rule.head.predicate].index(tuple(column for _, column in shared))
        if len(shared) == 1:
            [(position, _)] = shared
            return any(fact[position] in index for fact in inserted)
        return any(tuple(fact[position] for position, _ in shared) in index for fact in inserted)

    def _overdelete(
        self, stratum: Stratum, lower: Changes, members: frozenset[str], base_del: dict[str, set[Fact]]
    ) -> dict[str, set[Fact]]:
        """Step 1: everything that may have lost a derivation, found against the old state of the lower strata
        (their changes are undone for the search and redone after it)."""
        for pred, (ins, dels) in lower.items():
            self.relations[pred].remove(ins)
            self.relations[pred].add(dels)
        overdeleted: dict[str, set[Fact]] = {p: set() for p in members}
        try:  # a plan that fails leaves the lower strata as they were, for what undoes the evaluation
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
                for rule, _, predicate, is_negation, plan in self.book.of(stratum).seeds:
                    if not is_negation and frontier.get(predicate):
                        self._merge(heads, rule, self.book.execute(plan, frontier[predicate]))
                frontier = {}
                self._grow_overdeleted(heads, overdeleted, frontier)
        finally:
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
                self._merge(delta, rule, self.book.run(rule, Seed(SEED_HEAD), candidates))
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
        seeds = self.book.of(stratum).seeds_by_predicate
        for predicate, change in lower.items():
            for rule, _, _, is_negation, plan in seeds.get(predicate, ()):
                facts = change[negated if is_negation else positive]
                if facts:
                    self._merge(heads, rule, self.book.execute(plan, facts))

    def _grow_overdeleted(
        self, heads: dict[str, set[Fact]], overdeleted: dict[str, set[Fact]], frontier: dict[str, set[Fact]]
    ) -> None:
        for pred, found in heads.items():
            fresh = (found & self.relations[pred].facts) - overdeleted[pred]
            if fresh:
                overdeleted[pred] |= fresh
                frontier[pred] = fresh
