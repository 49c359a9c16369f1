"""One incremental evaluation, compiled: the strata a set of inserted predicates can reach, in order, as one
generated Python function.

An incremental evaluation after only insertions (a tool call's facts supposed, an observation asserted) touches the
same strata in the same order every time the same predicates change. The generic loop (a heap of woken strata, a
delete-rederive pass per stratum, a look-up of every seeded plan's inputs) spent four fifths of a decision finding
out what to do; the plans themselves a fifth. Here that is decided once per set of changed predicates:

- a stratum of base facts alone takes the inserted facts as they are;
- a stratum that does not recurse and has no aggregate runs, for each of its rules, the plan seeded from each body
  atom whose predicate gained facts, called directly with its inputs — skipped only when an atom it reads before
  anything that can fail has an empty relation (``skippable``: it can neither match nor raise) — unless facts went
  below it or a new fact under one of its ``!`` may take a stored head away (``_blocks_stored``), when the stratum
  is handed to the generic delete-rederive step;
- a stratum of aggregates kept group by group hands the rows its rules' seeded plans find to their groups
  (``_rows_added``), unless the groups are not kept or something below it was lost or negated;
- every other stratum (recursive, aggregating without kept groups, one whose own facts were asserted) is handed to
  the generic step.

Changed predicates are met lowest stratum first, as the generic loop meets them, so a rule that fails is the one the
generic loop reports. The result is the generic evaluation's, fact for fact (a property test compares them on random
programs and random changes, and the guard's policy on random calls). The generated text holds no program text:
predicates, plans, relations and rules are passed into the function's namespace by number, as ``codegen`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .analysis import Rule, Stratum
from .ast import Atom, Const, Negation, Var
from .codegen import CALL, INDEX, SEED, CompiledRule
from .planner import order_body
from .storage import Fact, add_facts, remove_facts

if TYPE_CHECKING:
    from .core import Changes
    from .incremental import Incremental as Engine

Step = Callable[[Mapping[str, set[Fact]], "Changes", Any], None]  # (inserted base facts, changes, stats)


MAX_STRATA = 128  # a step reaching more strata is not compiled: checking each one it does not reach costs more than
# the generic loop's visiting only the strata a change wakes (a chain of hundreds of one-rule strata), and compiling it
# takes tens of milliseconds (the MCP guard's decision reaches fewer than 54)


def compile_step(engine: Engine, inserted: frozenset[str]) -> Step | None:
    """The evaluation of an insertion of facts of ``inserted`` (and nothing retracted) into ``engine``; None when
    the insertion reaches more than ``MAX_STRATA`` strata."""
    return _StepWriter(engine).write(inserted)


class _StepWriter:
    """Writes one step's source; every name it writes is numbered, every object it needs goes into ``namespace``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.namespace: dict[str, Any] = {
            "E": engine,
            "OVER": engine._over_limit,
            "GENERIC": engine._stratum_step,
            "KEPT": engine._groups_kept,
            "GROUPS": engine._rows_added,
            "FAILED": engine.book.plan_failed,
            "CAUGHT": engine.book.caught,
            "ADD": add_facts,
            "REMOVE": remove_facts,
            "INF": float("inf"),
            "NONE": frozenset(),  # a change's deleted facts when nothing went (read, never added to)
        }
        self.names: dict[int, str] = {}  # id(object) -> its name in the namespace
        self.values: dict[tuple[str, Any], str] = {}  # (prefix, value) -> the name of the value's one copy
        self.known: set[str] = set()  # the change locals known not to be None where the text is being written
        self.lines: list[str] = []
        self.counter = 0

    def name(self, prefix: str, value: Any) -> str:
        """The namespace name of ``value`` (one per object)."""
        key = id(value)
        if key not in self.names:
            self.counter += 1
            self.names[key] = f"{prefix}{self.counter}"
            self.namespace[self.names[key]] = value
        return self.names[key]

    def value(self, prefix: str, value: Any, make: Callable[[Any], Any] | None = None) -> str:
        """The namespace name of an equal ``value`` (one per distinct value: equal checks are written alike, so
        ``stratum`` writes each once), holding ``make(value)`` when given."""
        key = (prefix, value)
        if key not in self.values:
            self.values[key] = self.name(prefix, make(value) if make is not None else value)
        return self.values[key]

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def write(self, inserted: frozenset[str]) -> Step | None:
        engine = self.engine
        analyzed = engine.analyzed
        reached = set(inserted)
        numbers = sorted({analyzed.stratum_of[p] for p in inserted})
        due = set(numbers)
        for number in range(min(numbers, default=0), len(analyzed.strata)):
            if number not in due:
                continue
            for predicate in analyzed.strata[number].predicates:
                reached.add(predicate)
                due.update(reader for reader in engine.book.readers.get(predicate, ()) if reader > number)
        if len(due) > MAX_STRATA:
            return None
        self.emit(0, "def step(BI, C, S):")
        self.emit(1, "LIMIT = E.created_fact_limit")  # read once: nothing in a step changes it
        self.emit(1, "if LIMIT is None:")
        self.emit(2, "LIMIT = INF")
        self.emit(1, "N = E._created")  # the engine's count of created facts, kept in a local (back before a generic
        # stratum, which counts its own, and at the end)
        # whether a change so far may hold deleted facts (one handed in, a generic stratum's, a group's)
        self.emit(1, "LOST = any(change[1] for change in C.values()) if C else False")
        for number in sorted(due):
            self.stratum(number, inserted, reached)
        self.emit(1, "E._created = N")
        source = "\n".join(self.lines) + "\n"
        scope = dict(self.namespace)
        exec(compile(source, "<incremental step>", "exec"), scope)
        step: Step = scope["step"]
        step.source = source  # type: ignore[attr-defined]
        return step

    def stratum(self, number: int, inserted: frozenset[str], reached: set[str]) -> None:
        engine = self.engine
        stratum = engine.analyzed.strata[number]
        members = set(stratum.predicates)
        order = engine.analyzed.stratum_of  # the generic loop meets the changed predicates lowest stratum first
        reads = sorted((p for p in engine.book.strata[number].reads if p in reached and p not in members),
                       key=lambda p: (order[p], p))  # fmt: skip
        own = members & inserted
        if not stratum.rules:  # base facts alone: they change as asserted
            for predicate in sorted(own):
                key = self.name("k", predicate)
                self.emit(1, f"b = BI.get({key})")
                self.emit(1, "if b:")
                self.emit(2, "S.strata_updated += 1")
                self.insert(2, predicate, "b")
                self.emit(2, f"C[{key}] = (b, NONE)")
            return
        lowers = {predicate: f"l{i}" for i, predicate in enumerate(reads)}
        for predicate, local in lowers.items():
            self.emit(1, f"{local} = C.get({self.name('k', predicate)})")
        woken = [f"{local} is not None" for local in lowers.values()]
        generic = f"E._created = N; GENERIC({self.name('n', number)}, C, BI); N = E._created"
        grouped = stratum.aggregates and engine._groupable[number]
        if own or stratum.recursive or (stratum.aggregates and not grouped):
            self.emit(1, f"if {' or '.join([*woken, *(f'BI.get({self.name(chr(107), p)})' for p in sorted(own))])}:")
            self.emit(2, generic)
            self.emit(2, "LOST = True")
            return
        self.emit(1, f"if {' or '.join(woken) or 'False'}:")
        # below a stratum's one lower change, that change is there: its checks skip asking (fewer lines run per call)
        self.known = set(lowers.values()) if len(lowers) == 1 else set()
        # whether a lower change lost facts is asked only once something may have (LOST): insertions alone lose none
        lost = [f"{self.there(local)}{local}[1]" for local in lowers.values()]
        losing = [f"(LOST and ({' or '.join(lost)}))"] if lost else []
        if grouped:
            losing.insert(0, f"not KEPT({self.name('n', number)}, {self.name('s', stratum)})")
        for rule, literal, seeded, is_negation, _ in engine.book.of(stratum).seeds:
            if is_negation and seeded in lowers:
                losing.append(self.blocks(rule, literal, lowers[seeded], grouped))
        self.emit(2, f"if {' or '.join(dict.fromkeys(losing))}:")  # each distinct check once
        self.emit(3, generic)
        self.emit(3, "LOST = True")
        self.emit(2, "else:")
        self.emit(3, "S.strata_updated += 1")
        if grouped:
            self.aggregates(stratum, lowers)
        else:
            self.rules(stratum, lowers)
        self.known = set()

    def there(self, local: str) -> str:
        """The test that a change local is there, as the start of a conjunction ("" where it is known to be)."""
        return "" if local in self.known else f"{local} is not None and "

    def blocks(self, rule: Rule, literal: int, local: str, grouped: bool) -> str:
        """Whether the facts ``local`` gained, under the rule's ``!`` at ``literal``, may take a stored head away
        (inline ``Engine._blocks_stored``; for a kept aggregate, as ``Engine._update_groups`` judges it: any). The
        gained facts' keys are read in C (``map`` of an ``itemgetter``) and met with the head's index in one
        ``isdisjoint``: the MCP guard's decisions ask this for six negations per call."""
        engine = self.engine
        shared = () if grouped else engine.book.shared(rule, literal)
        if not shared:
            return f"({self.there(local)}{local}[0])"
        relation = engine.relations[rule.head.predicate]
        index = f"{self.name('R', relation)}.index({self.value('c', tuple(column for _, column in shared))})"
        key = self.value("G", tuple(position for position, _ in shared), lambda positions: itemgetter(*positions))
        return f"({self.there(local)}not {index}.keys().isdisjoint(map({key}, {local}[0])))"

    def rules(self, stratum: Stratum, lowers: dict[str, str]) -> None:
        """A stratum that neither recurses nor aggregates: each rule seeded from what its atoms gained. When every
        plan has a relation that must not be empty, the stratum asks once whether any can run before anything else
        (a policy's provenance rules over a session with no history: nothing to do in five strata a decision)."""
        engine = self.engine
        heads = sorted({rule.head.predicate for rule in stratum.rules})
        head_sets = {predicate: f"h{i}" for i, predicate in enumerate(heads)}
        seeds = engine.book.of(stratum).seeds
        calls = {predicate: [(rule, plan) for rule, _, seeded, is_negation, plan in seeds
                             if seeded == predicate and not is_negation] for predicate in lowers}  # fmt: skip
        guards = [self.guard(plan) for found in calls.values() for _, plan in found]
        depth = 3
        if guards and all(guards):
            self.emit(3, "if " + " or ".join(f"({guard})" for guard in dict.fromkeys(guards)) + ":")
            depth = 4
        for local in head_sets.values():
            self.emit(depth, f"{local} = set()")
        for predicate, local in lowers.items():
            if calls[predicate]:
                self.emit(depth, f"if {self.there(local)}{local}[0]:")
                for rule, plan in calls[predicate]:
                    self.call(depth + 1, plan, f"{local}[0]", head_sets[rule.head.predicate])
        for predicate, local in head_sets.items():
            relation = self.name("R", engine.relations[predicate])
            key = self.name("k", predicate)
            self.emit(depth, f"{local} -= {relation}.facts")
            self.emit(depth, f"if {local}:")
            self.insert(depth + 1, predicate, local)
            self.emit(depth + 1, f"C[{key}] = ({local}, NONE)")

    def aggregates(self, stratum: Stratum, lowers: dict[str, str]) -> None:
        """A stratum of aggregating rules kept group by group, after insertions alone: each rule's new body rows
        (its plans seeded from what its atoms gained) handed to its groups, as ``Engine._update_groups`` does."""
        engine = self.engine
        for rule in stratum.rules:
            self.emit(3, "rows = set()")
            for predicate, local in lowers.items():
                plans = [plan for seeded_rule, _, seeded, is_negation, plan in engine.book.of(stratum).seeds
                         if seeded_rule is rule and seeded == predicate and not is_negation]  # fmt: skip
                if plans:
                    self.emit(3, f"if {self.there(local)}{local}[0]:")
                    for plan in plans:
                        self.call(4, plan, f"{local}[0]", "rows")
            relation = self.name("R", engine.relations[rule.head.predicate])
            key = self.name("k", rule.head.predicate)
            self.emit(3, "if rows:")
            self.emit(4, f"inserted, deleted = GROUPS({self.name('r', rule)}, rows)")
            self.emit(4, "if deleted:")
            self.emit(5, f"REMOVE({relation}, deleted)")
            self.insert(4, rule.head.predicate, "inserted")
            self.emit(4, "if inserted or deleted:")
            self.emit(5, f"C[{key}] = (inserted, deleted)")
            self.emit(4, "if deleted:")
            self.emit(5, "LOST = True")

    def insert(self, depth: int, predicate: str, facts: str) -> None:
        """``Engine._insert`` inline: the facts (known new) into their relation, counted (``N``) against the engine's
        limit on created facts as it is when the step runs."""
        relation = self.name("R", self.engine.relations[predicate])
        self.emit(depth, f"ADD({relation}, {facts})")  # Relation.add without the method call
        self.emit(depth, f"N += len({facts})")
        self.emit(depth, "if N > LIMIT:")
        self.emit(depth + 1, f"OVER({self.name('k', predicate)})")

    def skippable(self, plan: CompiledRule) -> set[str]:
        """The predicates whose relation, when empty, makes the plan yield nothing *and raise nothing*: its stored
        atoms read before anything that can fail (a comparison, a function, a built-in or external predicate) in the
        order the plan runs its body. A plan whose filter could raise before such an atom is read always runs, as
        the generic loop runs it: skipping it would hide the error (a policy's refusal to evaluate, failing closed)."""
        rule, seed, predicates = plan.rule, plan.seed, self.engine.relations
        if seed is not None and seed.literal >= 0:
            seeded = rule.body[seed.literal]
            atom = seeded.atom if isinstance(seeded, Negation) else seeded
            if not isinstance(atom, Atom) or any(not isinstance(arg, Var | Const) for arg in atom.args):
                return set()  # the seed's own values are computed as it is read
        found: set[str] = set()
        for position in order_body(rule, seed, self.engine.predicates)[0]:
            literal = rule.body[position]
            atom = literal.atom if isinstance(literal, Negation) else literal
            if not isinstance(atom, Atom) or atom.predicate not in predicates:
                break  # a comparison, a built-in or an external: it may raise
            if any(not isinstance(arg, Var | Const) for arg in atom.args):
                break  # a function in the atom's arguments runs before the relation is read
            if not isinstance(literal, Negation):
                found.add(atom.predicate)
        return found

    def guard(self, plan: CompiledRule) -> str:
        """The test that lets the plan run: each relation it can be skipped on (``skippable``) holds facts ("" when
        there is none)."""
        needed = sorted({self.name("R", self.engine.relations[predicate]) for predicate in self.skippable(plan)})
        return " and ".join(f"{relation}.facts" for relation in needed)

    def call(self, depth: int, plan: CompiledRule, seed: str, heads: str) -> None:
        """``heads |= plan(inputs)``, skipped when a stored atom it reads before anything that can fail has an empty
        relation (``skippable``)."""
        engine = self.engine
        args = []
        for source in plan.sources:
            if source.kind == SEED:
                args.append(seed)
            elif source.kind == CALL:
                args.append(self.name("X", engine.book.external(plan, source.predicate)))
            elif source.kind == INDEX:  # built when first read, as the generic loop builds it
                relation = engine.relations[source.predicate]
                args.append(f"{self.name('R', relation)}.index({self.name('c', source.columns)})")
            else:  # FACTS or SCAN: the fact set
                args.append(f"{self.name('R', engine.relations[source.predicate])}.facts")
        guard = self.guard(plan)
        if guard:
            self.emit(depth, f"if {guard}:")
            depth += 1
        self.emit(depth, "try:")
        self.emit(depth + 1, f"{heads} |= {self.name('P', plan.function)}({', '.join(args)})")
        self.emit(depth, "except CAUGHT as exc:")
        self.emit(depth + 1, f"FAILED({self.name('r', plan.rule)}, exc)")
