"""The policy a run is pinned to: recorded when the run is created, loaded by every later drive.

A run's guard rules (``guards.mg``), cortex patterns, the configuration's roles (when it sets any) and its limits
are copied into its ``RunCreated`` event with a SHA-256 digest of them all. A resume, a console decision or another
process drives the run under exactly that policy, whatever has changed on disk or in the driving process's options
since — a custom safety rule cannot silently stop applying halfway through a run. A pin whose digest does not match
its contents was changed outside groundstate, and the run is refused. Re-pinning a run is an operator's decision,
recorded as its own event (``PolicyRepinned``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ..config import KernelConfig
from ..errors import StoreError
from .cortex import Pattern, compile_patterns
from .workflow import Role


class PolicyPinError(StoreError):
    """A run's pinned policy cannot be used: it is malformed or its digest does not match its contents."""


@dataclass(frozen=True)
class PinnedPolicy:
    """Guard rules, cortex patterns, roles and limits as one run runs under them."""

    guards: str  # the text of guards.mg
    patterns: tuple[Pattern, ...]
    digest: str
    roles: tuple[Role, ...] | None = None  # the configuration's roles; None: the workflow's own or the shipped ones
    limits: KernelConfig | None = None  # None only in runs pinned before limits were

    @classmethod
    def of(
        cls, guards: str, patterns: list[Pattern], roles: list[Role] | None = None, limits: KernelConfig | None = None
    ) -> PinnedPolicy:
        """The pin of ``guards``, ``patterns``, ``roles`` and ``limits``, with its digest."""
        pinned = cls(guards, tuple(patterns), "", tuple(roles) if roles is not None else None, limits)
        return cls(guards, pinned.patterns, _digest(pinned._contents()), pinned.roles, limits)

    def _contents(self) -> dict[str, Any]:
        contents: dict[str, Any] = {"guards": self.guards,
                                    "patterns": [p.model_dump(by_alias=True) for p in self.patterns]}  # fmt: skip
        if self.roles is not None:
            contents["roles"] = [role.model_dump() for role in self.roles]
        if self.limits is not None:
            contents["limits"] = self.limits.model_dump(mode="json")
        return contents

    @classmethod
    def from_json(cls, data: Any, run_id: str) -> PinnedPolicy:
        """The pin as recorded in the run's ``RunCreated`` event; PolicyPinError if it was tampered with."""
        try:
            guards, digest = data["guards"], data["digest"]
            patterns = tuple(Pattern.model_validate(item) for item in data["patterns"])
            roles = tuple(Role.model_validate(r) for r in data["roles"]) if data.get("roles") is not None else None
            limits = KernelConfig.model_validate(data["limits"]) if data.get("limits") is not None else None
        except (KeyError, TypeError, ValueError) as exc:
            raise PolicyPinError(f"run {run_id}: its pinned policy cannot be read ({exc})") from None
        pinned = cls(guards, patterns, digest, roles, limits) if isinstance(guards, str) else None
        if pinned is None or _digest(pinned._contents()) != digest:
            raise PolicyPinError(f"run {run_id}: its pinned policy does not match its digest; it was changed outside "
                                 "groundstate")  # fmt: skip
        return pinned

    def to_json(self) -> dict[str, Any]:
        """The pin as recorded in ``RunCreated``."""
        return {**self._contents(), "digest": self.digest}

    @property
    def compiled_patterns(self) -> str:
        """The patterns as Mangle rules."""
        return compile_patterns(list(self.patterns))

    @property
    def triggers(self) -> set[str]:
        """The event types some pattern listens to."""
        return {p.trigger_event for p in self.patterns}

    @property
    def acting(self) -> bool:
        """Whether a pattern does more than ask for approval (interrupts or spawns agents)."""
        return any(p.action.request_approval is None for p in self.patterns)


def _digest(contents: dict[str, Any]) -> str:
    canonical = json.dumps(contents, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
