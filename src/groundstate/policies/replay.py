"""``groundstate policy replay``: every decision the MCP guard recorded, re-decided under a candidate policy from the
facts it was decided from (the ledger keeps them), and the calls whose decision would flip — with the candidate's
derivation and the recorded one — and a summary per flip and reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..guard import Ledger, McpPolicy, Recorded
from ..logic import RecordedFactsError, decode_facts
from ..runtime import REPLAY_TIME_LIMIT_S


@dataclass(frozen=True)
class Flip:
    """A recorded decision the candidate would decide otherwise."""

    recorded: Recorded
    decision: str  # the candidate's
    reasons: list[str]
    why: str  # the candidate's derivation of its first reason


@dataclass
class Replay:
    """What a replay found: the flips, how many decisions were re-decided, and those it could not re-decide."""

    flips: list[Flip] = field(default_factory=list)
    replayed: int = 0
    unreadable: list[tuple[int, str]] = field(default_factory=list)  # (entry, why it cannot be re-decided)

    def summary(self) -> Counter[tuple[str, str, str]]:
        """Flips by (recorded decision, candidate's, the candidate's first reason)."""
        return Counter((flip.recorded.decision, flip.decision, flip.reasons[0]) for flip in self.flips)


def replay_mcp(ledger: Ledger, candidate: list[Path], since: datetime | None = None,
               server: str | None = None) -> Replay:  # fmt: skip
    """Re-decide every recorded decision (``since``, of ``server``) under the shipped policy and ``candidate``."""
    policy = McpPolicy(candidate, time_limit=REPLAY_TIME_LIMIT_S)
    found = Replay()
    for recorded in ledger.recorded(since, server):
        if recorded.problem is not None:
            found.unreadable.append((recorded.id, recorded.problem))
            continue
        if recorded.facts is None:
            found.unreadable.append((recorded.id, "recorded before groundstate kept a decision's facts"))
            continue
        try:
            facts = decode_facts(recorded.facts)
        except RecordedFactsError as exc:
            found.unreadable.append((recorded.id, str(exc)))
            continue
        verdict = policy.replay(facts, recorded.decision)
        found.replayed += 1
        if verdict.decision != recorded.decision:
            found.flips.append(Flip(recorded, verdict.decision, verdict.reasons, verdict.why))
    return found
