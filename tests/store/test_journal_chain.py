"""The tool journal acts only on rows its chain vouches for: a row removed or changed outside groundstate between two
of its writes is a call in doubt — never run again unasked, never replayed as recorded — found by an attack on the
store's chain (deleting an intent made a killed driver's effect run twice, and audit verify then passed)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from groundstate.store import CallInDoubt, ToolJournal

ARGUMENTS = {"code": "open('effects.txt', 'a').write('ran')"}


def journal(tmp_path: Path, key: bytes | None = None) -> tuple[ToolJournal, Path]:
    database = tmp_path / "journal.db"
    return ToolJournal(f"sqlite:///{database}", audit_key=key), database


def test_an_intent_removed_by_hand_is_in_doubt_not_run_again(tmp_path: Path) -> None:
    tools, database = journal(tmp_path)
    assert tools.begin("run:r/a/1", 1, "execute_python", ARGUMENTS) is None  # the intent; then the driver died
    with sqlite3.connect(database) as db:
        db.execute("DELETE FROM tool_journal WHERE state = 'intent'")
    with pytest.raises(CallInDoubt, match=r"tool_journal row .* was removed outside groundstate"):
        tools.begin("run:r/a/1", 1, "execute_python", ARGUMENTS)


def test_a_result_written_by_hand_is_not_replayed(tmp_path: Path) -> None:
    tools, database = journal(tmp_path)
    assert tools.begin("run:r/a/1", 1, "execute_python", ARGUMENTS) is None
    tools.finish("run:r/a/1", 1, "execute_python", ARGUMENTS, {"ok": True, "output": "ran", "facts": []})
    with sqlite3.connect(database) as db:
        db.execute("UPDATE tool_journal SET result = ?", (json.dumps({"ok": True, "output": "FORGED", "facts": []}),))
    with pytest.raises(CallInDoubt, match=r"was changed outside groundstate since its last link \(done\)"):
        tools.begin("run:r/a/1", 1, "execute_python", ARGUMENTS)


def test_rows_groundstate_wrote_are_acted_on_as_before(tmp_path: Path) -> None:
    tools, _ = journal(tmp_path, key=b"an-audit-key-of-the-operator")
    assert tools.begin("run:r/a/1", 1, "execute_python", ARGUMENTS) is None
    tools.finish("run:r/a/1", 1, "execute_python", ARGUMENTS, {"ok": True, "output": "ran", "facts": []})
    assert tools.begin("run:r/a/1", 1, "execute_python", ARGUMENTS) == {"ok": True, "output": "ran", "facts": []}


def test_with_signing_on_a_row_written_by_hand_without_a_link_is_in_doubt(tmp_path: Path) -> None:
    tools, database = journal(tmp_path, key=b"an-audit-key-of-the-operator")
    assert tools.begin("run:r/a/1", 1, "execute_python", ARGUMENTS) is None
    with sqlite3.connect(database) as db:  # a whole row, copied under another key, with its result
        db.execute("INSERT INTO tool_journal (scope, position, digest, tool, arguments, state, holder, started_at, "
                   "result) SELECT scope, 2, digest, tool, arguments, 'done', holder, started_at, ? FROM tool_journal",
                   (json.dumps({"ok": True, "output": "FORGED", "facts": []}),))  # fmt: skip
    with pytest.raises(CallInDoubt, match=r"carries no link though \[audit\] sign is on"):
        tools.begin("run:r/a/1", 2, "execute_python", ARGUMENTS)
