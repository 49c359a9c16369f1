"""A journaled call's intent is on the disk before its effect runs: the store's SQLite runs in WAL with
``synchronous=NORMAL`` (a commit survives a process crash, not a power loss), so the journal fsyncs the WAL file
between the intent's commit and the effect — a power loss cannot leave an effect that ran with no intent to hold it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from groundstate.kernel import Action, JournaledEffects, Outcome, ShardProfile
from groundstate.store import ToolJournal


class Effects:
    """A virtual store whose one executor records what was synced to the disk when it ran."""

    def __init__(self, synced: list[str]) -> None:
        self.synced = synced
        self.seen_at_effect: list[str] = []

    def run(self, executor: str, action: Action, profile: ShardProfile) -> Outcome:
        self.seen_at_effect = list(self.synced)
        return Outcome(True, "done")


def test_the_intent_is_fsynced_before_the_effect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = ToolJournal(f"sqlite:///{tmp_path / 'gs.db'}")
    synced: list[str] = []
    real = os.fsync

    def recording(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real(descriptor)

    monkeypatch.setattr(os, "fsync", recording)
    effects = Effects(synced)
    store: Any = effects
    outcome = JournaledEffects(journal, "run:x/").run(store, "files", Action("/a1", "write_file", "a", "x"),
                                                      ShardProfile())  # fmt: skip
    assert outcome.ok
    assert str(tmp_path / "gs.db-wal") in effects.seen_at_effect  # synced before the effect ran


def test_a_database_without_a_wal_file_needs_no_sync(tmp_path: Path) -> None:
    journal = ToolJournal("sqlite://")  # in memory: nothing to sync, and no error
    journal.durable()
