"""The store's record nobody can quietly edit: every write to the MCP guard's ledger and to the tool journal is a
link of one chain per store (store/audit.py), and ``groundstate audit verify`` names the first row or link that was
changed, removed, inserted or reordered by someone who had the database file but not groundstate. The rows are
written by a real guard (``mcp serve`` over stdio, the real ``mcp-server-time`` upstream, the SDK's client); each
edit is made with sqlite3, as an attacker would make it. With ``[audit] sign``, a chain rewritten whole — every link
recomputed — is caught by the head's signature, which needs the operator's key."""

from __future__ import annotations

import atexit
import hashlib
import hmac
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.client.session import ClientSession

from ..console.conftest import serving
from .test_mcp_guard import TIME, guarded

KEY = "k" * 32
DENY_TOKYO = 'mcp_denied(C, "no Tokyo") :- mcp_argument(C, "timezone", "Asia/Tokyo").\n'


async def three_calls(client: ClientSession) -> None:
    for zone in ("Europe/Paris", "Asia/Tokyo", "Europe/London"):
        await client.call_tool("time__get_current_time", {"timezone": zone})


_WRITTEN: dict[tuple[str, tuple[tuple[str, str], ...]], Path] = {}  # each store a real guard wrote, once per module


def written(tmp_path: Path, config: str = "", env: dict[str, str] | None = None) -> Path:
    """A store with three decisions of a real guard (the second denied by the operator's rule), in ``tmp_path``: a
    copy of the one the guard wrote for this configuration and environment — each test edits its own copy, and the
    guard, its upstream and its client start three times in this module instead of twenty."""
    key = (config, tuple(sorted((env or {}).items())))
    if key not in _WRITTEN:
        original = Path(tempfile.mkdtemp(prefix="audit-store-"))
        atexit.register(shutil.rmtree, original, True)
        (original / "mine.mg").write_text(DENY_TOKYO)
        guarded(original, TIME + '[mcp]\npolicy = ["mine.mg"]\n' + config, three_calls, env=env)
        _WRITTEN[key] = original
    shutil.copytree(_WRITTEN[key], tmp_path, dirs_exist_ok=True)
    return tmp_path / "home" / "groundstate.db"


def verify(store: Path, *arguments: str, env: dict[str, str] | None = None,
           config: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    given = ["--config", str(config)] if config is not None else []
    environment = {"PATH": "/usr/bin:/bin", "GROUNDSTATE_HOME": str(store.parent), **(env or {})}
    return subprocess.run([sys.executable, "-m", "groundstate", "audit", "verify", "--db", f"sqlite:///{store}",
                           *given, *arguments], capture_output=True, text=True, timeout=60, env=environment)


def store_line(done: subprocess.CompletedProcess[str]) -> str:
    [line] = [line for line in done.stdout.splitlines() if line.startswith("store:")]
    return line


def permit_the_denied(db: sqlite3.Connection) -> None:
    db.execute("UPDATE mcp_decisions SET decision = 'permit', status = 'permit', reasons = '[]' WHERE id = 2")


def remove_a_decision(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM mcp_decisions WHERE id = 2")


def insert_a_decision(db: sqlite3.Connection) -> None:
    db.execute("INSERT INTO mcp_decisions (at, call, server, tool, arguments, digest, client, decision, reasons, why, "
               "status) SELECT at, call, server, tool, arguments, digest, 'mallory', decision, reasons, why, status "
               "FROM mcp_decisions WHERE id = 1")  # fmt: skip


def swap_two_decisions(db: sqlite3.Connection) -> None:
    db.execute("UPDATE mcp_decisions SET id = -1 WHERE id = 1")
    db.execute("UPDATE mcp_decisions SET id = 1 WHERE id = 3")
    db.execute("UPDATE mcp_decisions SET id = 3 WHERE id = -1")


def remove_the_last_link(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM audit_links WHERE seq = (SELECT max(seq) FROM audit_links)")


def change_a_link(db: sqlite3.Connection) -> None:
    db.execute("UPDATE audit_links SET kind = 'denied' WHERE seq = 2")


@pytest.mark.parametrize(("edit", "where", "how"), [
    (permit_the_denied, "mcp_decisions row [2]", "changed"),
    (remove_a_decision, "mcp_decisions row [2]", "removed"),
    (insert_a_decision, "mcp_decisions row [4]", "inserted"),
    (swap_two_decisions, "mcp_decisions row [1]", "reordered"),
    (remove_the_last_link, "link ", "removed"),
    (change_a_link, "link 2 ", "changed"),
])  # fmt: skip
def test_each_edit_of_the_ledger_outside_groundstate_is_named(
    edit: Callable[[sqlite3.Connection], None], where: str, how: str, tmp_path: Path
) -> None:
    store = written(tmp_path)
    clean = verify(store)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert store_line(clean).startswith("store: verified ") and ", unsigned" in store_line(clean), clean.stdout
    with sqlite3.connect(store) as db:
        edit(db)
    found = verify(store)
    assert found.returncode == 1 and "Traceback" not in found.stderr, found.stdout + found.stderr
    line = store_line(found)
    assert line.startswith(f"store: {where}") and f" was {how}: " in line, line


def test_a_journal_row_changed_is_named(tmp_path: Path) -> None:
    store = written(tmp_path)
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT count(*) FROM tool_journal").fetchone()[0]
        assert rows >= 2  # the two permitted calls: an intent, then its result
        db.execute("UPDATE tool_journal SET result = ? WHERE rowid = (SELECT min(rowid) FROM tool_journal)",
                   (json.dumps({"content": [{"type": "text", "text": "forged"}]}),))  # fmt: skip
    found = verify(store, "--json")
    assert found.returncode == 1
    [whole] = [line for line in map(json.loads, found.stdout.splitlines()) if line.get("store")]
    assert whole["ok"] is False and whole["how"] == "changed" and whole["where"].startswith("tool_journal row ")


def relinked(db: sqlite3.Connection) -> None:
    """Every link recomputed after an edit, as an attacker who read store/audit.py would: the chain is whole again."""
    previous = ""
    links = db.execute("SELECT seq, source, row_key, kind FROM audit_links ORDER BY seq").fetchall()
    for seq, source, row_key, kind in links:
        digest = current_digest(db, source, json.loads(row_key))
        text = json.dumps([previous, source, row_key, kind, digest], ensure_ascii=False, separators=(",", ":"))
        previous = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        db.execute("UPDATE audit_links SET digest = ?, link = ? WHERE seq = ?", (digest, previous, seq))
    db.execute("UPDATE audit_heads SET link = ?", (previous,))


def current_digest(db: sqlite3.Connection, source: str, key: list[object]) -> str:
    covered = {"mcp_decisions": "at, call, server, tool, arguments, digest, client, decision, reasons, why, status, "
                                "expires_at, operator, decided_at, ended, answered, account, policy, shadow, facts",
               "tool_journal": "tool, arguments, state, result, holder, started_at, finished_at, resolution"}
    where = "id = ?" if source == "mcp_decisions" else "scope = ? AND position = ? AND digest = ?"
    row = db.execute(f"SELECT {covered[source]} FROM {source} WHERE {where}", key).fetchone()
    text = json.dumps(list(row), ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_a_chain_rewritten_whole_passes_unsigned_and_fails_its_signature(tmp_path: Path) -> None:
    unsigned = written(tmp_path / "unsigned")
    with sqlite3.connect(unsigned) as db:
        permit_the_denied(db)
        relinked(db)
    assert verify(unsigned).returncode == 0  # what a chain alone cannot show: why signing exists

    config = tmp_path / "signed" / "groundstate.toml"
    signed = written(tmp_path / "signed", "[audit]\nsign = true\n", env={"GROUNDSTATE_AUDIT_KEY": KEY})
    clean = verify(signed, env={"GROUNDSTATE_AUDIT_KEY": KEY}, config=config)
    assert clean.returncode == 0 and "signed (link " in store_line(clean) and "checked)" in store_line(clean)
    config.with_name("none.toml").write_text("")
    unchecked = verify(signed, config=config.with_name("none.toml"))  # no key at hand: said, not claimed
    assert unchecked.returncode == 0 and "signed, not checked: no key" in store_line(unchecked)
    with sqlite3.connect(signed) as db:
        permit_the_denied(db)
        relinked(db)
    found = verify(signed, env={"GROUNDSTATE_AUDIT_KEY": KEY}, config=config)
    assert found.returncode == 1 and "Traceback" not in found.stderr
    assert "does not verify with the configured key" in store_line(found), found.stdout
    wrong_key = verify(signed, env={"GROUNDSTATE_AUDIT_KEY": "x" * 32}, config=config)
    assert wrong_key.returncode == 1


def test_signing_without_a_key_starts_nothing(tmp_path: Path) -> None:
    (tmp_path / "groundstate.toml").write_text(TIME + "[audit]\nsign = true\n")
    done = subprocess.run([sys.executable, "-m", "groundstate", "audit", "verify", "--config",
                           str(tmp_path / "groundstate.toml"), "--db", f"sqlite:///{tmp_path / 'gs.db'}"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "GROUNDSTATE_HOME": str(tmp_path)})  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "GROUNDSTATE_AUDIT_KEY is not set" in done.stdout + done.stderr


def test_the_console_shows_whether_the_ledger_verifies(tmp_path: Path) -> None:
    store = written(tmp_path)
    with serving(tmp_path) as console:
        before = console.api().get("/calls").text
        with sqlite3.connect(store) as db:
            permit_the_denied(db)
        after = console.api().get("/calls").text
    assert re.search(r'class="audit verified">Ledger and journal verified: \d+ links over \d+ rows; unsigned',
                     before), before  # fmt: skip
    assert ('class="audit broken">Ledger or journal edited outside groundstate: mcp_decisions row [2] was changed'
            in after), after


def test_key_env_names_the_variable_that_holds_the_key(tmp_path: Path) -> None:
    config = tmp_path / "groundstate.toml"
    store = written(tmp_path, '[audit]\nsign = true\nkey_env = "TEAM_AUDIT_KEY"\n', env={"TEAM_AUDIT_KEY": KEY})
    checked = verify(store, env={"TEAM_AUDIT_KEY": KEY, "GROUNDSTATE_AUDIT_KEY": "x" * 32}, config=config)
    assert checked.returncode == 0 and "checked)" in store_line(checked), checked.stdout + checked.stderr
    wrong = verify(store, env={"TEAM_AUDIT_KEY": "y" * 32, "GROUNDSTATE_AUDIT_KEY": KEY}, config=config)
    assert wrong.returncode == 1 and "does not verify with the configured key" in store_line(wrong)


# -- found by an attack helper: each stays a test --------------------------------------------------------------------
def drop_the_chain(db: sqlite3.Connection) -> None:
    permit_the_denied(db)
    db.execute("DROP TABLE audit_links")
    db.execute("DROP TABLE audit_heads")


def empty_the_chain(db: sqlite3.Connection) -> None:
    permit_the_denied(db)
    db.execute("DELETE FROM audit_links")
    db.execute("DELETE FROM audit_heads")


def unsign_after_relinking(db: sqlite3.Connection) -> None:
    permit_the_denied(db)
    relinked(db)
    db.execute("UPDATE audit_heads SET signature = NULL, signed_seq = NULL")


@pytest.mark.parametrize("edit", [drop_the_chain, empty_the_chain, unsign_after_relinking])
def test_with_signing_on_a_chain_removed_or_unsigned_fails(edit: Callable[[sqlite3.Connection], None],
                                                           tmp_path: Path) -> None:  # fmt: skip
    config = tmp_path / "groundstate.toml"
    signed = written(tmp_path, "[audit]\nsign = true\n", env={"GROUNDSTATE_AUDIT_KEY": KEY})
    with sqlite3.connect(signed) as db:
        edit(db)
    found = verify(signed, env={"GROUNDSTATE_AUDIT_KEY": KEY}, config=config)
    assert found.returncode == 1 and "Traceback" not in found.stderr, found.stdout + found.stderr
    assert store_line(found).startswith("store: not verified: ") and "[audit] sign is on" in store_line(found)
    unsigned = verify(signed)  # without signing, the same store is said to carry unlinked rows, not "verified" clean
    if edit is not unsign_after_relinking:
        assert "rows carry no link" in store_line(unsigned), unsigned.stdout


def test_a_signature_rolled_back_to_an_older_head_fails_with_signing_on(tmp_path: Path) -> None:
    config = tmp_path / "groundstate.toml"
    signed = written(tmp_path, "[audit]\nsign = true\n", env={"GROUNDSTATE_AUDIT_KEY": KEY})
    with sqlite3.connect(signed) as db:
        old = db.execute("SELECT seq, link FROM audit_links WHERE seq = 1").fetchone()
        message = json.dumps(["store", old[0], old[1]], separators=(",", ":")).encode()
        kept = "hmac-sha256:" + hmac.new(KEY.encode(), message, hashlib.sha256).hexdigest()  # as it was at link 1
        permit_the_denied(db)
        relinked(db)
        db.execute("UPDATE audit_heads SET signed_seq = 1, signature = ?", (kept,))
    found = verify(signed, env={"GROUNDSTATE_AUDIT_KEY": KEY}, config=config)
    assert found.returncode == 1 and "links follow the last signed head" in store_line(found), found.stdout


@pytest.mark.parametrize("statement", [
    "UPDATE mcp_decisions SET decision = CAST(decision AS BLOB) WHERE id = 2",
    "UPDATE audit_heads SET signed_seq = 'abc', signature = 'zz'",
    "UPDATE audit_links SET seq = 'x' WHERE seq = (SELECT max(seq) FROM audit_links)",
    "UPDATE audit_links SET row_key = 'not json' WHERE seq = 1",
    "INSERT INTO mcp_decisions (id, at, server, tool, arguments, digest, client, decision, reasons, why, status) "
    "SELECT 0, at, server, tool, arguments, digest, 'mallory', decision, reasons, why, status FROM mcp_decisions "
    "WHERE id = 1",
])  # fmt: skip
def test_values_groundstate_never_writes_are_named_never_a_traceback(statement: str, tmp_path: Path) -> None:
    config = tmp_path / "groundstate.toml"
    signed = written(tmp_path, "[audit]\nsign = true\n", env={"GROUNDSTATE_AUDIT_KEY": KEY})
    with sqlite3.connect(signed) as db:
        db.execute(statement)
    found = verify(signed, env={"GROUNDSTATE_AUDIT_KEY": KEY}, config=config)
    assert found.returncode == 1 and "Traceback" not in found.stderr + found.stdout, found.stdout + found.stderr
    assert store_line(found).startswith("store: "), found.stdout
