"""What a stdio guard keeps of its session for the client's next guard process, on SQLite and on PostgreSQL: read
back in order, within the bounds (the oldest results removed first, counted by number and by characters; then the
session resumes marked), the declared requests beside them, and removed once the client process that kept them is
gone."""

from __future__ import annotations

import subprocess

from sqlalchemy import create_engine, text

from groundstate.guard import KeptHistory
from groundstate.logic import Name
from groundstate.provenance import Kept
from groundstate.store import parent_process, this_process

from ..postgres import postgres  # noqa: F401 (the PostgreSQL fixture)


def part(number: int, text: str) -> Kept:
    origins = (("flow_argument_from", (f"call-{number}", "to", f"call-{number - 1}", Name("/whole"))),)
    return Kept(number, f"call-{number}", "mail", "read_inbox", text, {"bob@x.example": 1}, origins, False)


def test_results_come_back_in_order_within_both_bounds(store_url: str) -> None:
    engine = create_engine(store_url)
    writer = KeptHistory(engine, max_calls=100, max_bytes=10_000)  # trims nothing of these
    session = f"stdio:{this_process()}"
    writer.request(session, "Summarise my mail")
    for number, said in enumerate(["a" * 10, "b" * 10, "c" * 10, "d" * 10], 1):
        writer.result(session, part(number, said))
    kept = KeptHistory(engine, max_calls=3, max_bytes=25)  # a guard started with smaller bounds
    requests, parts, unseen = kept.load(session)
    assert requests == ["Summarise my mail"] and unseen  # two results removed: the session resumes marked
    assert [(p.number, p.text) for p in parts] == [(3, "c" * 10), (4, "d" * 10)]  # 4 > 3 calls; 30 > 25 characters
    assert kept.load(session)[1:] == (parts, False)  # removed from the store: nothing more is missing now
    assert parts[1] == part(4, "d" * 10)  # read back whole: the data and the origins with their names
    assert kept.load("stdio:another-client") == ([], [], False)


def test_what_a_gone_client_process_kept_is_removed(store_url: str) -> None:
    kept = KeptHistory(create_engine(store_url), max_calls=10, max_bytes=1000)
    ended = subprocess.run(["/bin/sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    gone = f"stdio:{this_process().split(':')[0]}:{ended.stdout.strip()}:1"  # a process that ran, and no longer does
    here = f"stdio:{parent_process()}"  # the process that started this one: running
    for session in (gone, here):
        kept.result(session, part(1, "hello there"))
    assert kept.forget_gone() == 1
    assert kept.load(gone) == ([], [], False)
    assert [p.number for p in kept.load(here)[1]] == [1]


def test_a_long_session_keeps_the_store_near_its_bounds_as_it_goes(store_url: str) -> None:
    """Between loads, the oldest results are removed as results are added (every ``KeptHistory.TRIM_EVERY``, or
    sooner once a quarter of the bytes' bound came in): a guard serving one session for days does not fill the
    store."""
    engine = create_engine(store_url)
    kept = KeptHistory(engine, max_calls=2, max_bytes=1_000_000)
    session = f"stdio:{this_process()}"
    for number in range(1, 41):
        kept.result(session, part(number, f"result {number}"))
    with engine.connect() as db:
        count = db.execute(text("SELECT COUNT(*) FROM mcp_history WHERE session = :s"), {"s": session}).scalar_one()
    assert count <= 2 + KeptHistory.TRIM_EVERY
    kept = KeptHistory(engine, max_calls=100, max_bytes=100)  # the bytes' bound: each result removes the older
    for number in range(41, 61):
        kept.result(session, part(number, "x" * 40))
    with engine.connect() as db:
        count = db.execute(text("SELECT COUNT(*) FROM mcp_history WHERE session = :s"), {"s": session}).scalar_one()
    assert count <= 3  # 40 characters each, more than a quarter of 100: trimmed at every one
