"""Learned rules: proposed at runtime, checked in isolation, quarantined, then trusted.

A proposal is refused if it does not parse, uses Package/Use, defines a protected head (anything the shipped files
declare except the extension points below — so never ``permission_check_result``, ``action_permitted``,
``pending_action``, ``routing_result``, ``execution_result``, …), uses predicates nobody declares, breaks
stratification, or exceeds the derived-fact limit on the kernel's current facts. All of that is checked in a
separate engine; the kernel is untouched until the rule is accepted.

An accepted rule runs in quarantine for N evaluations (``count="evaluations"``, one kernel's own lifetime) or N
completed runs (``count="runs"``: the runtime calls ``count_completed_run`` when a run completes). Quarantined, it
is not part of the deciding kernel at all: after each of the kernel's evaluations it is evaluated in an engine
of its own over the kernel's facts (its heads renamed), so what it derives is recorded but nothing reads or acts
on it, and a rule that fails there (values that explode, a fact limit) is marked failed and never promoted — it
cannot fail or slow a decision. Then it becomes active. Rules persist in ``learned.mg``; several kernels and
processes share one file, so every write is a merge under a lock (a countdown never goes back up, recorded
derivations are kept, a rule proposed elsewhere stays). Recorded lines are JSON strings: a derivation's text cannot
forge a rule's header, and a proposal may hold no comment line.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import PolicyError
from ..logic import Atom, Clause, Engine, LogicError, Negation, Program, SourceUnit, display_fact, parse_unit
from .kernel import Kernel

EXTENSION_POINTS = frozenset({
    "denied", "requires_user_approval", "chesterton_fence_warning", "clarification_needed", "ambiguity_flag",
    "next_action", "intent_action",
})  # fmt: skip
ALWAYS_PROTECTED = frozenset({"permitted", "safe_action", "permitted_action"})  # other systems' names for a permit
QUARANTINE_PREFIX = "learned_quarantine_"
MAX_RECORDED = 200
_MARK = "# learned: "
_DERIVED = "# derived in quarantine: "
_FAILED = "# failed in quarantine: "


class LearnedRuleError(PolicyError, ValueError):
    """Why a proposed rule was refused."""


@dataclass
class LearnedRule:
    """A rule the model proposed: its number, its text, and its quarantine (evaluations left, what it derived)."""

    number: int
    text: str
    remaining: int  # evaluations left in quarantine; 0 = active
    derivations: list[str] = field(default_factory=list)  # what it derived while quarantined
    failed: str | None = None  # why it failed in quarantine: then it is never promoted

    @property
    def active(self) -> bool:
        """Whether the quarantine is over, so its derivations count (never for a rule that failed)."""
        return self.remaining == 0 and self.failed is None


class LearnedRules:
    """The learned rules of one kernel: proposed, checked in isolation, quarantined, then active."""

    def __init__(
        self,
        kernel: Kernel,
        path: str | Path | None = None,
        *,
        quarantine_evaluations: int = 5,
        count: Literal["evaluations", "runs"] = "evaluations",
    ) -> None:
        self.kernel = kernel
        self.path = None if path is None else Path(path)
        self.quarantine_evaluations = quarantine_evaluations  # how long a new rule stays quarantined, in ``count``
        self.count = count
        self.base_sources = list(kernel.sources)
        base = Program.load(*self.base_sources).analyze()
        self.protected = (frozenset(base.predicates) - EXTENSION_POINTS) | ALWAYS_PROTECTED
        self.rules: list[LearnedRule] = self._load()
        if self.rules:
            self._install()
        kernel.after_evaluation.append(self.observe)

    # -- proposing -----------------------------------------------------------------------------------
    def propose(self, text: str) -> LearnedRule:
        """Accept ``text`` as a learned rule in quarantine, or refuse it (LearnedRuleError) with the reason."""
        self._check_syntax(text)
        candidate = LearnedRule(self._next_number(), text.strip(), self.quarantine_evaluations)
        program = self._program([*(r for r in self.rules if r.failed is None), candidate])
        try:
            engine = Engine(program, created_fact_limit=self.kernel.config.core_limits.max_derived_facts_limit,
                            externals=self.kernel._externals)  # fmt: skip
            for predicate, facts in self.kernel.engine.base.items():
                if predicate.startswith(QUARANTINE_PREFIX):
                    continue  # a quarantined rule's renamed heads: the check runs every rule unrenamed
                engine.assert_facts(predicate, [f for f in facts if f not in engine.base[predicate]])
            engine.evaluate()
        except LogicError as exc:
            raise LearnedRuleError(f"refused: {exc}") from None
        self.rules.append(candidate)
        self._install()
        self._save()
        return candidate

    def _check_syntax(self, text: str) -> None:
        try:
            unit = parse_unit(text, "<learned rule>")
        except LogicError as exc:
            raise LearnedRuleError(f"refused: not valid Mangle: {exc}") from None
        if any(line.lstrip().startswith("#") for line in text.splitlines()):
            raise LearnedRuleError("refused: learned rules may not contain comments (the rules file keeps its own)")
        if unit.package or unit.uses:
            raise LearnedRuleError("refused: learned rules may not use Package or Use")
        if not unit.clauses:
            raise LearnedRuleError("refused: no rule in the proposal")
        declared_here = {decl.atom.predicate for decl in unit.decls}
        for clause in unit.clauses:
            head = clause.head.predicate
            if head in self.protected or head in ALWAYS_PROTECTED:
                raise LearnedRuleError(f"refused: it defines the protected predicate {head}")
            if head not in declared_here and head not in EXTENSION_POINTS:
                raise LearnedRuleError(f"refused: {head} is not declared (add a Decl for it to the proposal)")
        for decl in unit.decls:
            if decl.atom.predicate in self.protected:
                raise LearnedRuleError(f"refused: it redeclares {decl.atom.predicate}")

    # -- quarantine ----------------------------------------------------------------------------------
    def observe(self) -> None:
        """After each kernel evaluation: run the quarantined rules apart and record what they derive (or that they
        failed); counting evaluations, count down and promote."""
        promoted = False
        for rule in self.rules:
            if rule.active or rule.failed is not None:
                continue
            self._shadow(rule)
            if self.count == "evaluations" and rule.failed is None:
                rule.remaining -= 1
                promoted = promoted or rule.active
        if promoted:
            self._install()
        if self.rules:
            self._save()

    def _shadow(self, rule: LearnedRule) -> None:
        """Evaluate ``rule`` (heads renamed) with the active rules over the kernel's asserted facts, in an engine of
        its own; record its derivations, or why it failed."""
        program = self._program([r for r in self.rules if r.active], quarantined=[rule])
        try:
            engine = Engine(program, created_fact_limit=self.kernel.config.core_limits.max_derived_facts_limit,
                            externals=self.kernel._externals)  # fmt: skip
            for predicate, facts in self.kernel.engine.base.items():
                if predicate in engine.base and facts:
                    engine.assert_facts(predicate, [f for f in facts if f not in engine.base[predicate]])
            engine.evaluate()
        except LogicError as exc:
            rule.failed = " ".join(str(exc).split())[:500]
            return
        for head in sorted(_heads(rule)):
            for fact in engine.facts(f"{QUARANTINE_PREFIX}{rule.number}_{head}"):
                shown = display_fact(head, fact)
                if shown not in rule.derivations and len(rule.derivations) < MAX_RECORDED:
                    rule.derivations.append(shown)

    # -- program ---------------------------------------------------------------------------------------
    def _install(self) -> None:
        """The deciding kernel's program: the shipped sources and the active rules only."""
        self.kernel.replace_program(self._program([r for r in self.rules if r.active]))

    def _program(self, rules: list[LearnedRule], *, quarantined: Sequence[LearnedRule] = ()) -> Program:
        units = [parse_unit(rule.text, f"learned rule {rule.number}") for rule in rules]
        for rule in quarantined:
            unit = parse_unit(rule.text, f"learned rule {rule.number}")
            units.append(_renamed(unit, f"{QUARANTINE_PREFIX}{rule.number}_", _heads(rule)))
        return Program.load(*self.base_sources) + Program(units)

    def _next_number(self) -> int:
        return max((r.number for r in self.rules), default=0) + 1

    # -- persistence -----------------------------------------------------------------------------------
    def _save(self) -> None:
        if self.path is None:
            return
        with _locked(self.path):
            self.rules = _merged(_read(self.path), self.rules)
            _write(self.path, self.rules)

    def _load(self) -> list[LearnedRule]:
        if self.path is None or not self.path.exists():
            return []
        with _locked(self.path):
            return _read(self.path)


def count_completed_run(path: str | Path) -> list[LearnedRule]:
    """One more completed run for every quarantined rule in ``path`` (rules counted in runs); the rules after it.
    Derivations are recorded only by kernels, so this needs none."""
    path = Path(path)
    if not path.exists():
        return []
    with _locked(path):
        rules = _read(path)
        for rule in rules:
            if rule.failed is None:
                rule.remaining = max(rule.remaining - 1, 0)
        _write(path, rules)
    return rules


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock beside ``path`` (``path.lock``) for one read-modify-write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read(path: Path) -> list[LearnedRule]:
    if not path.exists():
        return []
    rules: list[LearnedRule] = []
    blocks: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():  # a rule starts only at a line that is its mark
        if line.startswith(_MARK):
            blocks.append([line.removeprefix(_MARK)])
        elif blocks:
            blocks[-1].append(line)
    for header, *rest in blocks:
        body = "\n".join(rest)
        number, _, remaining = header.partition(" remaining ")
        lines = body.strip().splitlines()
        derived = [_text(line.removeprefix(_DERIVED)) for line in lines if line.startswith(_DERIVED)]
        failed = next((_text(line.removeprefix(_FAILED)) for line in lines if line.startswith(_FAILED)), None)
        text = "\n".join(line for line in lines if not line.startswith("#")).strip()
        rules.append(LearnedRule(int(number), text, int(remaining), derived, failed))
    return rules


def _write(path: Path, rules: list[LearnedRule]) -> None:
    lines = ["# groundstate learned rules: written by the kernel; each rule follows its '# learned:' line."]
    for rule in rules:
        lines += [f"{_MARK}{rule.number} remaining {rule.remaining}", rule.text]
        lines += [f"{_DERIVED}{json.dumps(shown)}" for shown in rule.derivations]  # one line each, whatever they hold
        lines += [f"{_FAILED}{json.dumps(rule.failed)}"] if rule.failed is not None else []
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


def _text(recorded: str) -> str:
    """A recorded line's text: a JSON string (written since derivations are escaped), else as it stands (older)."""
    try:
        loaded = json.loads(recorded)
    except ValueError:
        return recorded
    return loaded if isinstance(loaded, str) else recorded


def _merged(stored: list[LearnedRule], mine: list[LearnedRule]) -> list[LearnedRule]:
    """This kernel's rules (the same objects, brought up to date) and the file's others, by number: the lower
    countdown, every recorded derivation (bounded)."""
    by_number = {rule.number: rule for rule in mine}
    for other in stored:
        rule = by_number.setdefault(other.number, other)
        if rule is other:
            continue
        rule.remaining = min(other.remaining, rule.remaining)
        rule.failed = rule.failed or other.failed
        rule.derivations[:0] = [d for d in other.derivations if d not in rule.derivations]
        del rule.derivations[MAX_RECORDED:]
    return [by_number[number] for number in sorted(by_number)]


def _heads(rule: LearnedRule) -> set[str]:
    return {clause.head.predicate for clause in parse_unit(rule.text, "<learned rule>").clauses}


def _renamed(unit: SourceUnit, prefix: str, heads: set[str]) -> SourceUnit:
    """The unit with its own heads renamed (in heads and bodies), so nothing else reads what it derives."""

    def atom(a: Atom) -> Atom:
        return Atom(prefix + a.predicate, a.args, a.pos) if a.predicate in heads else a

    clauses = []
    for clause in unit.clauses:
        body = tuple(
            atom(lit) if isinstance(lit, Atom) else Negation(atom(lit.atom), lit.pos) if isinstance(lit, Negation)
            else lit
            for lit in clause.body
        )  # fmt: skip
        clauses.append(Clause(atom(clause.head), body, clause.transform, clause.pos))
    decls = [d for d in unit.decls if d.atom.predicate not in heads]  # a renamed head needs no declaration
    return SourceUnit(unit.source, decls=decls, clauses=clauses)
