"""Retention: the action log stays bounded in the kernel; settled envelopes move to cold storage (SQLite).

An envelope is settled when it was routed, or denied for a reason other than waiting for approval. When more
than ``core_limits.max_action_log`` envelopes are in the kernel, the oldest settled ones are written to the
``action_log`` table — with their derived decision, which would otherwise be lost — and every fact keyed by
their ActionID is retracted in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..logic import display
from .kernel import Kernel, Transaction

KEYED = ("pending_action", "action_source", "permit_record", "routing_result", "routing_error", "execution_result",
         "user_approved", "delegation", "user_question")  # fmt: skip
_SCHEMA = """
CREATE TABLE IF NOT EXISTS action_log (
    number INTEGER PRIMARY KEY,
    action_id TEXT NOT NULL UNIQUE,
    created_ms INTEGER NOT NULL,
    type TEXT NOT NULL,
    target TEXT NOT NULL,
    decision TEXT,
    reason TEXT,
    status TEXT,
    output TEXT,
    facts TEXT NOT NULL
)"""


@dataclass(frozen=True)
class ArchivedAction:
    """A settled action moved to cold storage by retention: its facts, kept for reports."""

    action_id: str
    created_ms: int
    type: str
    target: str
    decision: str | None
    reason: str | None
    status: str | None
    output: str | None
    facts: list[str]


class ColdStorage:
    """The archived action log; ``path`` None keeps it in memory (tests, throwaway sessions)."""

    def __init__(self, path: str | Path | None = None) -> None:
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(":memory:" if path is None else str(path))
        self.db.execute(_SCHEMA)

    def add(self, rows: list[tuple[Any, ...]]) -> None:
        """Archive ``rows`` (action facts) in one transaction."""
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO action_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def count(self) -> int:
        """How many actions are archived."""
        return int(self.db.execute("SELECT count(*) FROM action_log").fetchone()[0])

    def last_number(self) -> int:
        """The highest action number archived (0 when none), so numbering continues after a restart."""
        return int(self.db.execute("SELECT coalesce(max(number), 0) FROM action_log").fetchone()[0])

    def get(self, action_id: str) -> ArchivedAction | None:
        """The archived action ``action_id``, or None."""
        row = self.db.execute("SELECT * FROM action_log WHERE action_id = ?", (action_id,)).fetchone()
        if row is None:
            return None
        _, action_id, created, kind, target, decision, reason, status, output, facts = row
        return ArchivedAction(action_id, created, kind, target, decision, reason, status, output, json.loads(facts))


def action_number(action_id: Any) -> int:
    return int(str(action_id).rsplit("/", 1)[1])


def compact(kernel: Kernel, storage: ColdStorage) -> int:
    """Archive the oldest settled envelopes beyond the bound; returns how many moved."""
    bound = kernel.config.core_limits.max_action_log
    actions = kernel.query("pending_action(A, T, G, P, M)")
    excess = len(actions) - bound
    if excess <= 0:
        return 0
    settled_ids = {row[0] for row in kernel.query("settled(A)")}  # policy.mg decides what is settled
    settled = [row for row in actions if row[0] in settled_ids]
    settled.sort(key=lambda row: (row[4], action_number(row[0])))  # retention's order: oldest first
    chosen = settled[:excess]
    archive, tx = [], Transaction()
    for action_id, action_type, target, _, created in chosen:
        facts: list[str] = []
        for predicate in KEYED:
            rows = kernel.match(predicate, action_id, sort=True)
            tx.retract(predicate, *rows)
            facts += [f"{predicate}({', '.join(display(v) for v in row)})" for row in rows]
        decision, reason = kernel.final_decision(action_id)
        result = kernel.match("execution_result", action_id, sort=True)
        archive.append((
            action_number(action_id), str(action_id), created, str(action_type), target,
            decision, reason,
            str(result[0][2]) if result else None, result[0][3] if result else None, json.dumps(facts),
        ))  # fmt: skip
    storage.add(archive)  # first the archive, then the retraction: nothing is lost if the process dies between
    kernel.apply(tx)
    return len(chosen)


def next_number(kernel: Kernel, storage: ColdStorage | None) -> int:
    """The next free ActionID number, counting archived envelopes."""
    live = [action_number(row[0]) for row in kernel.query("pending_action(A, _, _, _, _)")]
    return max([*live, storage.last_number() if storage else 0, 0]) + 1
