"""mangle_updates checked with the logic engine's own parser and the kernel's declarations.

An update is accepted only if it is exactly one ground fact — no rule, no Decl, no variable, no function
other than the list/map/struct/pair constructors — of a predicate the schema declares, with the declared
arity and type bounds, and on the caller's allowlist. Anything else is dropped with the reason; the rest of
the packet is kept.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..logic import NotAGroundFact, PredicateInfo, bounds_problem, display_fact, parse_ground_fact


@dataclass(frozen=True)
class AcceptedUpdate:
    """A model-written fact that passed validation, ready for the kernel."""

    text: str
    predicate: str
    fact: tuple[Any, ...]


@dataclass(frozen=True)
class DroppedUpdate:
    """A model-written update that was refused, with the reason."""

    update: str
    reason: str


@dataclass
class UpdateCheck:
    accepted: list[AcceptedUpdate] = field(default_factory=list)
    dropped: list[DroppedUpdate] = field(default_factory=list)


class UpdateValidator:
    """``allowlist`` None means every declared predicate that is neither external nor in ``derived`` (the
    predicates rules define: asserting one would bypass the policy). Use None only with a trusted model."""

    def __init__(
        self,
        predicates: Mapping[str, PredicateInfo],
        allowlist: Collection[str] | None,
        *,
        derived: Collection[str] = (),
        max_updates: int = 2000,
        max_update_chars: int = 1000,
    ) -> None:
        self.predicates = predicates
        self.derived = frozenset(derived)
        self.allowlist = None if allowlist is None else frozenset(allowlist)
        self.max_updates = max_updates
        self.max_update_chars = max_update_chars

    def check(self, updates: list[str]) -> UpdateCheck:
        """Accepted and dropped updates of one packet (bounded by the limits; each refusal says why)."""
        result = UpdateCheck()
        for number, update in enumerate(updates):
            if number >= self.max_updates:
                result.dropped.append(DroppedUpdate(update, f"more than {self.max_updates} updates in one packet"))
                continue
            accepted = self.check_one(update)
            if isinstance(accepted, AcceptedUpdate):
                result.accepted.append(accepted)
            else:
                result.dropped.append(DroppedUpdate(update, accepted))
        return result

    def check_one(self, update: str) -> AcceptedUpdate | str:
        """The accepted update, or why it was dropped."""
        if len(update) > self.max_update_chars:
            return f"longer than {self.max_update_chars} characters ({len(update)})"
        try:
            found = parse_ground_fact(update, "<mangle_update>")
        except NotAGroundFact as exc:
            return str(exc)
        predicate, fact = found.predicate, found.args
        info = self.predicates.get(predicate)
        if info is None or info.decl is None:
            return f"{predicate} is not declared in the kernel's schemas"
        if info.external:
            return f"{predicate} is an external predicate; it cannot be asserted"
        if predicate in self.derived:
            return f"{predicate} is derived by the policy; it cannot be asserted"
        if info.arity != len(fact):
            return f"{predicate} has {info.arity} arguments, the update gives {len(fact)}"
        problem = bounds_problem(info, fact)
        if problem:
            return problem
        if self.allowlist is not None and predicate not in self.allowlist:
            return f"{predicate} is not on the allowlist of predicates the model may assert"
        return AcceptedUpdate(display_fact(predicate, fact), predicate, fact)
