"""What a stdio guard keeps of its session for the client's next guard process, on SQLite and on PostgreSQL: read
back in order, within the bounds (the oldest results removed first, counted by number and by characters of text and
data; then the session resumes marked), a forwarded call's empty place read as something unseen, and removed once
the client process that kept it is gone — or, when no guard here can tell, after a week without a write."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

from sqlalchemy import create_engine, text

from groundstate.guard import KeptHistory
from groundstate.logic import Name
from groundstate.provenance import Kept
from groundstate.store import parent_process, this_process

from ..postgres import postgres  # noqa: F401 (the PostgreSQL fixture)


def part(number: int, said: str, fields: dict[str, int] | None = None) -> Kept:
    origins = (("flow_argument_from", (f"call-{number}", "to", f"call-{number - 1}", Name("/whole"))),)
    data = {"bob@x.example": 1} if fields is None else fields
    return Kept(number, f"call-{number}", "mail", "read_inbox", said, data, origins, False)


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
    assert kept.load(session) == (parts, False)  # removed from the store: nothing more is missing now
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
    parts, held, unseen = this.catch_up(account, None, none.__contains__)
    assert unseen and [p.number for p in parts] == [3, 4]  # the oldest removed (a call in flight takes a place)
    assert this.catch_up(account, held, none.__contains__)[::2] == ([], False)  # nothing new, nothing unseen
    other.result(account, part(5, "said 5"), entry=77)  # in place of the newest row: on SQLite, with its id
    parts, held, unseen = this.catch_up(account, held, none.__contains__)
    assert (parts, unseen) == ([part(5, "said 5")], False)
    this.result(account, part(6, "said 6"))  # this guard's own
    other.result(account, part(7, "said 7"))
    parts, held, unseen = this.catch_up(account, held, {"call-6"}.__contains__)
    assert (parts, unseen) == ([part(7, "said 7")], False)
    other.result(account, part(8, "said 8"))
    with engine.begin() as db:
        db.execute(text("UPDATE mcp_history SET fields = '[1]' WHERE call = 'call-8'"))
    assert this.catch_up(account, held, none.__contains__)[::2] == ([], True)  # cannot be read: marked
    assert this.catch_up(f"http:{uuid.uuid4().hex}", None, none.__contains__)[::2] == ([], False)  # another account
