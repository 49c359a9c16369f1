"""Functional dependencies a ``Decl`` declares, and their check after each evaluation.

``Decl pause_hint(Run, Agent, Checkpoint, Hint) descr [fundep([Run, Agent, Checkpoint], [Hint])]`` says: facts of
``pause_hint`` that agree on ``Run, Agent, Checkpoint`` agree on ``Hint`` — at most one hint per checkpoint. An empty
key (``fundep([], [Phase])``) allows one value in the whole relation. The engine checks each dependency on the facts
an evaluation inserted (all of them after a full evaluation) and refuses a state that breaks one with a
``FunctionalDependencyError`` naming the predicate, the two clashing facts and where the ``Decl`` declares the
dependency: what callers used to check by hand ("exactly one decision") is now the policy's own declaration, held
by the engine for every caller.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ..errors import PolicyError
from .ast import Apply, Atom, Decl, Var
from .errors import EvaluationError, Position
from .storage import Relation
from .values import display_fact

Fact = tuple[Any, ...]


class FunctionalDependencyError(EvaluationError, PolicyError):
    """The rules derived two facts that agree on a declared key and differ on what it determines."""


@dataclass(frozen=True)
class FunDep:
    """Columns ``key`` determine columns ``dependent`` of one predicate; ``text`` as declared, at ``pos``."""

    key: tuple[int, ...]
    dependent: tuple[int, ...]
    text: str
    pos: Position


def declared(decl: Decl, report: Any) -> tuple[FunDep, ...]:
    """The ``fundep(...)`` descriptors of ``decl``; each problem goes to ``report(position, message)``."""
    names = [arg.name for arg in decl.atom.args if isinstance(arg, Var)]
    found: list[FunDep] = []
    for descriptor in decl.descriptors:
        if descriptor.predicate != "fundep":
            continue
        columns = _columns(descriptor, names, decl.atom.predicate, report)
        if columns is not None:
            key, dependent = columns
            text = f"fundep([{', '.join(names[i] for i in key)}], [{', '.join(names[i] for i in dependent)}])"
            found.append(FunDep(key, dependent, text, descriptor.pos))
    return tuple(found)


def _columns(
    descriptor: Atom, names: list[str], predicate: str, report: Any
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    usage = f"Decl {predicate}: write fundep([KeyArgument, ...], [DependentArgument, ...]) with its own arguments"
    lists = descriptor.args
    if len(lists) != 2 or not all(isinstance(part, Apply) and part.function == "fn:list" for part in lists):
        report(descriptor.pos, usage)
        return None
    sides: list[tuple[int, ...]] = []
    for part in lists:
        assert isinstance(part, Apply)
        side: list[int] = []
        for arg in part.args:
            if not isinstance(arg, Var) or arg.name not in names:
                report(getattr(arg, "pos", descriptor.pos), f"{usage}: {arg} is not one of {', '.join(names)}")
                return None
            side.append(names.index(arg.name))
        sides.append(tuple(side))
    key, dependent = sides
    if not dependent or set(key) & set(dependent):
        report(descriptor.pos, f"{usage}: the dependent side must be non-empty and share no argument with the key")
        return None
    return key, dependent


def check(predicate: str, relation: Relation, fundeps: Iterable[FunDep], inserted: Iterable[Fact] | None) -> None:
    """Refuse the relation's state if a fact of ``inserted`` (every fact when None) clashes with another on a
    dependency; the bucket of the key's index is all that is read, so the check costs one lookup per new fact."""
    for fundep in fundeps:
        facts = relation.facts if inserted is None else inserted
        dependent = itemgetter(*fundep.dependent)
        if not fundep.key:
            values = {dependent(fact): fact for fact in relation.facts}
            if len(values) > 1:
                _refuse(predicate, fundep, *list(values.values())[:2])
            continue
        key = itemgetter(*fundep.key)
        index = relation.index(fundep.key)
        for fact in facts:
            wanted = dependent(fact)
            for other in index.get(key(fact), ()):
                if dependent(other) != wanted:
                    _refuse(predicate, fundep, fact, other)


def _refuse(predicate: str, fundep: FunDep, first: Fact, second: Fact) -> None:
    one, two = sorted((display_fact(predicate, first), display_fact(predicate, second)))
    raise FunctionalDependencyError(
        f"{predicate} breaks its {fundep.text}: {one} and {two} agree on the key and differ on the rest",
        fundep.pos,
    )
