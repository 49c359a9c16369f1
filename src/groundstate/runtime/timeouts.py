"""Approval timeouts: an open pause nobody decides within ``[approvals] timeout_sec`` gets a decision.

Python reports each open pause with its age; ``defaults/approvals.mg`` derives ``expired(Run, Pause, Decision)``
(a safety pause aborts the run, a quality pause gets ``default_decision``); the runtime records each decision as
the actor ``policy:approval_timeout``, through the same path as an operator's.
"""

from __future__ import annotations

import math
from datetime import datetime
from functools import cache
from importlib import resources

from ..logic import Engine, Name, Program
from .state import Pause

ACTOR = "policy:approval_timeout"


@cache
def _program() -> Program:
    """approvals.mg, parsed once per process (the console asks every few seconds)."""
    source = (resources.files("groundstate.runtime") / "defaults" / "approvals.mg").read_text(encoding="utf-8")
    return Program.parse(source, source="approvals.mg")


def expired(
    pauses: list[tuple[str, Pause]], timeout_sec: float, default_decision: str, now: datetime
) -> list[tuple[str, int, str]]:
    """(run, pause id, decision) for each of ``pauses`` (run, pause) the rules say has expired."""
    if not pauses:
        return []
    engine = Engine(_program())
    engine.assert_facts("approval_timeout", [(math.ceil(timeout_sec),)])
    engine.assert_facts("default_decision", [(Name.of(default_decision),)])
    engine.assert_facts("open_pause", [(run_id, pause.id, Name.of(pause.category),
                                        int((now - pause.at).total_seconds()) if pause.at is not None else 0)
                                       for run_id, pause in pauses])  # fmt: skip
    engine.evaluate()
    return [
        (str(run), int(pause), str(decision).lstrip("/")) for run, pause, decision in engine.query("expired(R, P, D)")
    ]
