"""The policy a run is pinned to: recorded when the run is created, loaded by every later drive.

A run's guard rules (``guards.mg``) and cortex patterns are copied into its ``RunCreated`` event with a SHA-256
digest of both. A resume, a console decision or another process drives the run under exactly that policy,
whatever has changed on disk or in the driving process's options since — a custom safety rule cannot silently
stop applying halfway through a run. A pin whose digest does not match its contents was changed outside
groundstate, and the run is refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ..errors import StoreError
from .cortex import Pattern, compile_patterns


class PolicyPinError(StoreError):
    """A run's pinned policy cannot be used: it is malformed or its digest does not match its contents."""


@dataclass(frozen=True)
class PinnedPolicy:
    """Guard rules and cortex patterns as one run runs under them."""

    guards: str  # the text of guards.mg
    patterns: tuple[Pattern, ...]
    digest: str

    @classmethod
    def of(cls, guards: str, patterns: list[Pattern]) -> PinnedPolicy:
        """The pin of ``guards`` and ``patterns``, with its digest."""
        return cls(guards, tuple(patterns), _digest(guards, [p.model_dump(by_alias=True) for p in patterns]))

    @classmethod
    def from_json(cls, data: Any, run_id: str) -> PinnedPolicy:
        """The pin as recorded in the run's ``RunCreated`` event; PolicyPinError if it was tampered with."""
        try:
            guards, dumped, digest = data["guards"], data["patterns"], data["digest"]
            patterns = tuple(Pattern.model_validate(item) for item in dumped)
        except (KeyError, TypeError, ValueError) as exc:
            raise PolicyPinError(f"run {run_id}: its pinned policy cannot be read ({exc})") from None
        if not isinstance(guards, str) or _digest(guards, dumped) != digest:
            raise PolicyPinError(f"run {run_id}: its pinned policy does not match its digest; it was changed outside "
                                 "groundstate")  # fmt: skip
        return cls(guards, patterns, digest)

    def to_json(self) -> dict[str, Any]:
        """The pin as recorded in ``RunCreated``."""
        dumped = [p.model_dump(by_alias=True) for p in self.patterns]
        return {"guards": self.guards, "patterns": dumped, "digest": self.digest}

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


def _digest(guards: str, patterns: list[dict[str, Any]]) -> str:
    canonical = json.dumps({"guards": guards, "patterns": patterns}, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
