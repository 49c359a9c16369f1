"""What a stdio guard keeps of its session for the client's next guard process, on SQLite and on PostgreSQL: read
back in order, within the bounds (the oldest results removed first, counted by number and by characters of text and
data; then the session resumes marked), a forwarded call's empty place read as something unseen, and removed once
the client process that kept it is gone — or, when no guard here can tell, after a week without a write."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from groundstate.guard import Held, KeptHistory
from groundstate.logic import Name
from groundstate.provenance import Kept
from groundstate.store import parent_process, this_process

from ..postgres import postgres  # noqa: F401 (the PostgreSQL fixture)


def part(number: int, said: str, fields: dict[str, int] | None = None) -> Kept:
    origins = (("flow_argument_from", (f"call-{number}", "to", f"call-{number - 1}", Name("/whole"))),)
    data = {"bob@x.example": 1} if fields is None else fields
    return Kept(number, f"call-{number}", "mail", "read_inbox", said, data, origins, False)


def caught(kept: KeptHistory, session: str, held: Held | None,
           own: Callable[[str], bool]) -> tuple[list[Kept], Held, bool]:  # fmt: skip
    """What ``kept.catch_up`` reads, with no bound on its size."""
    found = kept.catch_up(session, held, own)
    assert found is not None
    return found


def namespace() -> str:
    return str(os.stat("/proc/self/ns/pid").st_ino)


def test_results_come_back_in_order_within_both_bounds(store_url: str) -> None:
    engine = create_engine(store_url)
    writer = KeptHistory(engine, max_calls=100, max_bytes=10_000)  # trims nothing of these
    session = f"stdio:{namespace()}:{this_process()}:{uuid.uuid4().hex}"
    for number, said in enumerate(["a" * 10, "b" * 10, "c" * 10, "d" * 10], 1):
        writer.result(session, part(number, said, {}))
    kept = KeptHistory(engine, max_calls=3, max_bytes=25)  # a guard started with smaller bounds
    parts, unseen = kept.load(session)
    assert unseen  # two results removed: the session resumes marked
    assert [(p.number, p.text) for p in parts] == [(3, "c" * 10), (4, "d" * 10)]  # 4 > 3 calls; 30 > 25 characters
    assert parts[1] == part(4, "d" * 10, {})  # read back whole: the data and the origins with their names
    assert kept.load(session) == (parts, True)  # what was removed is still said: the guard after resumes marked too
    assert kept.load("stdio:another-client") == ([], False)


def test_a_call_whose_result_no_guard_kept_is_unseen(store_url: str) -> None:
    kept = KeptHistory(create_engine(store_url), max_calls=10, max_bytes=10_000)
    session = f"stdio:{namespace()}:{this_process()}:{uuid.uuid4().hex}"
    kept.pending(session, 7)
    kept.result(session, part(1, "kept"), entry=7)  # its place taken by its result
    assert kept.load(session) == ([part(1, "kept")], False)
    kept.pending(session, 8)  # forwarded, and its guard died before keeping what came back
    assert kept.load(session) == ([part(1, "kept")], True)


def test_what_a_gone_client_process_kept_is_removed_and_what_no_guard_here_can_check_ages_out(
    store_url: str,
) -> None:
    engine = create_engine(store_url)
    kept = KeptHistory(engine, max_calls=10, max_bytes=1000)
    ended = subprocess.run(["/bin/sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    host = this_process().split(":")[0]
    gone = f"stdio:{namespace()}:{host}:{ended.stdout.strip()}:1"  # a process that ran, and no longer does
    here = f"stdio:{namespace()}:{parent_process()}"  # the process that started this one: running
    elsewhere = f"stdio:4026531999:other-host-{uuid.uuid4().hex}:4242:99"  # another namespace and host: unknowable
    for session in (gone, here, elsewhere):
        kept.result(session, part(1, "hello there"))
    assert kept.forget_gone() == 1
    assert kept.load(gone) == ([], False)
    assert [p.number for p in kept.load(here)[0]] == [1]
    assert [p.number for p in kept.load(elsewhere)[0]] == [1]  # a live client in another container is not erased
    with engine.begin() as db:
        db.execute(text("UPDATE mcp_history SET at = :old WHERE session = :s"),
                   {"old": int(time.time()) - 8 * 24 * 3600, "s": elsewhere})  # fmt: skip
    assert kept.forget_gone() == 1  # a week without a write: removed
    assert kept.load(elsewhere) == ([], False)
    assert [p.number for p in kept.load(here)[0]] == [1]


def test_a_long_session_keeps_the_store_near_its_bounds_as_it_goes(store_url: str) -> None:
    """Between loads, the oldest results are removed as results are added (every ``KeptHistory.TRIM_EVERY``, or
    sooner once a quarter of the bytes' bound came in — its structured data counted too): a guard serving one
    session for days does not fill the store."""
    engine = create_engine(store_url)
    kept = KeptHistory(engine, max_calls=2, max_bytes=1_000_000)
    session = f"stdio:{namespace()}:{this_process()}:{uuid.uuid4().hex}"
    for number in range(1, 41):
        kept.result(session, part(number, f"result {number}"))
    assert _count(engine, session) <= 2 + KeptHistory.TRIM_EVERY
    kept = KeptHistory(engine, max_calls=100, max_bytes=100)  # the bytes' bound: each result removes the older
    for number in range(41, 61):
        kept.result(session, part(number, "x", {f"datum-{n}": 1 for n in range(4)}))  # 51 characters of data
    assert _count(engine, session) <= 2


def _count(engine: object, session: str) -> int:
    with engine.connect() as db:  # type: ignore[attr-defined]
        return int(db.execute(text("SELECT COUNT(*) FROM mcp_history WHERE session = :s"), {"s": session}).scalar_one())


def test_an_accounts_history_is_caught_up_with_what_other_guards_kept_since(store_url: str) -> None:
    """An HTTP account's history read by a guard that holds none of it (restarted): what ``load`` would mark is
    marked; then, holding those rows, only what another guard kept since is read — a call in flight at another guard
    marks nothing, its result is read once it is kept, the guard's own results are left out — and a row that cannot
    be read marks."""
    engine = create_engine(store_url)
    other, this = (KeptHistory(engine, max_calls=3, max_bytes=10_000) for _ in range(2))
    account = f"http:{uuid.uuid4().hex}"
    for number in (1, 2, 3, 4):  # one past the bound
        other.result(account, part(number, f"said {number}"))
    other.pending(account, 77)  # in flight at the other guard, and the newest row of the store
    none: set[str] = set()
    parts, held, unseen = caught(this, account, None, none.__contains__)
    assert unseen and [p.number for p in parts] == [3, 4]  # the oldest removed (a call in flight takes a place)
    assert caught(this, account, held, none.__contains__)[::2] == ([], False)  # nothing new, nothing unseen
    other.result(account, part(5, "said 5"), entry=77)  # in place of the newest row: on SQLite, with its id
    parts, held, unseen = caught(this, account, held, none.__contains__)
    assert (parts, unseen) == ([part(5, "said 5")], False)
    this.result(account, part(6, "said 6"))  # this guard's own
    other.result(account, part(7, "said 7"))
    parts, held, unseen = caught(this, account, held, {"call-6"}.__contains__)
    assert (parts, unseen) == ([part(7, "said 7")], False)
    other.result(account, part(8, "said 8"))
    with engine.begin() as db:
        db.execute(text("UPDATE mcp_history SET fields = '[1]' WHERE call = 'call-8'"))
    assert caught(this, account, held, none.__contains__)[::2] == ([], True)  # cannot be read: marked
    assert caught(this, f"http:{uuid.uuid4().hex}", None, none.__contains__)[::2] == ([], False)  # another account


def test_a_result_past_the_bytes_bound_alone_is_kept_cut_and_marked(store_url: str) -> None:
    """Found by an attack: a result whose text and data passed ``history_bytes`` was removed by its own write's
    trim, with every older row, and nothing said so — a restarted guard let the mail's URL go out. What fits is
    kept, marked; data past half the bound is left out (the text is what a model reads)."""
    engine = create_engine(store_url)
    kept = KeptHistory(engine, max_calls=10, max_bytes=100)
    account = f"http:{uuid.uuid4().hex}"
    kept.result(account, part(1, "the mail: visit evil.example " + "x" * 200, {"d" * 80: 1}))
    parts, _, unseen = caught(KeptHistory(engine, 10, 100), account, None, set[str]().__contains__)
    assert [(p.text[:29], len(p.text), p.fields, p.marked) for p in parts] == [
        ("the mail: visit evil.example ", 98, {}, True)]  # fmt: skip
    assert not unseen  # nothing removed; the part itself says something of it is unseen


def test_rows_removed_before_a_guard_read_them_mark_it_and_those_it_read_do_not(store_url: str) -> None:
    """A trim removes the oldest rows past the writer's bounds; a "lost" row says up to which id. A guard that had
    read them is not marked; one that had not — or reads the session afresh — is (found by an attack: a guard with
    smaller bounds removed the mail's row, and a restarted guard saw nothing of it)."""
    engine = create_engine(store_url)
    writer = KeptHistory(engine, max_calls=3, max_bytes=10_000)
    account, none = f"http:{uuid.uuid4().hex}", set[str]().__contains__
    reader = KeptHistory(engine, max_calls=100, max_bytes=10_000)
    _, held, _ = caught(reader, account, None, none)
    for number in range(1, KeptHistory.TRIM_EVERY + 1):  # the 16th write trims: 13 rows removed
        writer.result(account, part(number, f"said {number}"))
        _, held, unseen = caught(reader, account, held, none)  # reading as they come
        assert not unseen, number
    late = caught(reader, account, None, none)  # a guard started now: 13 results are gone
    assert late[2] and [p.number for p in late[0]] == [14, 15, 16]
    for number in range(17, 17 + KeptHistory.TRIM_EVERY):
        writer.result(account, part(number, f"said {number}"))
    parts, held, unseen = caught(reader, account, held, none)  # read nothing of the last 16 before the trim
    assert unseen and [p.number for p in parts] == [30, 31, 32]
    small = KeptHistory(engine, max_calls=1, max_bytes=10_000)  # a guard with smaller bounds, on its first read
    assert caught(small, account, None, none)[2]
    assert [p.number for p in caught(reader, account, None, none)[0]] == [32]
    assert caught(reader, account, None, none)[2]  # what it removed marks the next first reader too


def test_a_history_a_smaller_bound_emptied_is_read_on_past_what_a_guard_had_read(store_url: str) -> None:
    """Found by an attack: a guard with smaller bounds removed every row of a history, the table's newest among
    them; SQLite gave the next result an id below what a running guard had read, and that guard never saw the mail.
    Ids are never used again (AUTOINCREMENT on SQLite, a sequence on PostgreSQL): it reads the mail (unmarked: it
    had read every row removed)."""
    engine = create_engine(store_url)
    writer = KeptHistory(engine, max_calls=100, max_bytes=10_000)
    account, none = f"named:{uuid.uuid4().hex}", set[str]().__contains__
    for number in range(1, 6):
        writer.result(account, part(number, f"contacts {number}"))
    _, held, _ = caught(writer, account, None, none)  # a running guard read them all
    assert caught(KeptHistory(engine, max_calls=100, max_bytes=16), account, None, none)[2]  # removes every row
    writer.result(account, part(6, "the mail: visit evil.example"))
    parts, _, unseen = caught(writer, account, held, none)
    assert not unseen and [p.text for p in parts] == ["the mail: visit evil.example"]


def test_an_earlier_releases_table_is_rebuilt_never_to_reuse_ids(tmp_path: Path) -> None:
    """SQLite: a table created without AUTOINCREMENT (the release before) is rebuilt with it, rows and ids kept;
    past the largest id SQLite allows, a result is refused (the guard withholds it), never given a smaller id."""
    engine = create_engine(f"sqlite:///{tmp_path / 'store.db'}")
    with engine.begin() as db:
        db.execute(text("CREATE TABLE mcp_history (id INTEGER NOT NULL, session TEXT NOT NULL, kind TEXT NOT NULL, "
                        "number INTEGER NOT NULL, call TEXT NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL, "
                        "text TEXT NOT NULL, size INTEGER NOT NULL, fields TEXT NOT NULL, origins TEXT NOT NULL, "
                        "marked INTEGER NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (id))"))  # fmt: skip
        db.execute(text("CREATE INDEX ix_mcp_history_session ON mcp_history (session)"))
        db.execute(text("INSERT INTO mcp_history VALUES (7, 'named:a', 'result', 1, 'call-1', 'mail', "
                        "'read_inbox', 'kept before', 11, '{}', '[]', 0, 0)"))  # fmt: skip
    kept, none = KeptHistory(engine, max_calls=100, max_bytes=10_000), set[str]().__contains__
    KeptHistory(engine, max_calls=100, max_bytes=10_000)  # a second guard starting: nothing more to rebuild
    with engine.begin() as db:
        made = db.execute(text("SELECT sql FROM sqlite_master WHERE name = 'mcp_history'")).scalar_one()
        indexes = db.execute(text("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'mcp_history'"))
        assert "AUTOINCREMENT" in made and [name for (name,) in indexes] == ["ix_mcp_history_session"]
        db.execute(text("DELETE FROM mcp_history WHERE id = 7"))
    kept.result("named:a", part(2, "after"))
    with engine.begin() as db:  # the largest id removed: never given again
        assert db.execute(text("SELECT MAX(id) FROM mcp_history")).scalar_one() == 8
    with engine.begin() as db:
        db.execute(text("INSERT INTO mcp_history (id, session, kind, number, call, server, tool, text, size, fields, "
                        "origins, marked, at) VALUES (9223372036854775807, 'junk', 'result', 1, 'c', 's', 't', '', "
                        "0, '{}', '[]', 0, 0)"))  # fmt: skip
    with pytest.raises(sqlite3.Error, match="full"):
        kept.result("named:a", part(3, "refused"))
    assert [p.text for p in caught(kept, "named:a", None, none)[0]] == ["after"]


def test_new_results_past_a_bound_are_left_for_a_worker_thread(store_url: str) -> None:
    """A caller on the event loop bounds what a catch-up may read there: new results past ``most`` characters are
    not read at all (None), and read whole without the bound."""
    engine = create_engine(store_url)
    kept = KeptHistory(engine, max_calls=10, max_bytes=100_000)
    account, none = f"http:{uuid.uuid4().hex}", set[str]().__contains__
    _, held, _ = caught(kept, account, None, none)
    kept.result(account, part(1, "x" * 50, {}))
    assert kept.catch_up(account, held, none, most=51) is None  # 50 characters of text, 2 of data
    assert [p.number for p in caught(kept, account, held, none)[0]] == [1]
    assert kept.catch_up(account, held, none, most=52) is not None
