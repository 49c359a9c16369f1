"""``in_store`` runs a short store transaction on the event loop when SQLite's write lock is free, and in a worker
thread when another connection holds it: the loop never waits for another process's lock, the work is done exactly
once either way, and a transaction that may not wait leaves the connection waiting again for the next one."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from groundstate.store import WouldWait, hot_transaction, in_store, open_engine
from groundstate.store.database import _NOW_OR_NEVER

from ..postgres import postgres  # noqa: F401 (the PostgreSQL fixture)


def store(tmp_path: Path) -> tuple[Engine, Path]:
    path = tmp_path / "gs.db"
    engine = open_engine(f"sqlite:///{path}")
    with hot_transaction(engine) as db:
        db.exec_driver_sql("CREATE TABLE calls (n INTEGER)")
    return engine, path


def count(engine: Engine) -> int:
    with hot_transaction(engine) as db:
        return int(db.exec_driver_sql("SELECT count(*) FROM calls").scalar_one())


def held_lock(path: Path, seconds: float) -> threading.Event:
    """Another connection (as another process would) takes the write lock and keeps it for ``seconds``; the event is
    set once it holds it."""
    holding = threading.Event()

    def hold() -> None:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        holding.set()
        time.sleep(seconds)
        other.execute("COMMIT")
        other.close()

    threading.Thread(target=hold, daemon=True).start()
    assert holding.wait(5)
    return holding


def test_with_the_lock_free_the_work_runs_on_the_loop_once(tmp_path: Path) -> None:
    engine, _ = store(tmp_path)
    threads: list[int] = []

    def work(n: int) -> int:
        threads.append(threading.get_ident())
        with hot_transaction(engine) as db:
            db.exec_driver_sql("INSERT INTO calls VALUES (?)", (n,))
        return n

    async def main() -> int:
        return await in_store(engine, work, 7)

    assert asyncio.run(main()) == 7
    assert threads == [threading.get_ident()] and count(engine) == 1


@pytest.mark.alone
def test_with_the_lock_taken_the_loop_goes_on_and_the_work_waits_in_a_thread(tmp_path: Path) -> None:
    """The lock is held for 0.5 s: the work is done once, after it, in a worker thread, while the loop keeps turning
    (a ticker every 10 ms goes on all along)."""
    engine, path = store(tmp_path)
    threads: list[int] = []

    def work() -> None:
        threads.append(threading.get_ident())
        with hot_transaction(engine) as db:
            db.exec_driver_sql("INSERT INTO calls VALUES (1)")

    async def main() -> list[float]:
        ticks: list[float] = []

        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0.02)
        held_lock(path, 0.5)
        await in_store(engine, work)
        ticking.cancel()
        return ticks

    ticks = asyncio.run(main())
    gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
    assert len(threads) == 2 and threads[0] == threading.get_ident() != threads[1]  # tried, then the thread
    assert count(engine) == 1
    assert len(ticks) > 20 and max(gaps) < 0.25  # the loop never stood still for the lock


def test_a_transaction_that_may_not_wait_does_nothing_and_the_next_one_waits(tmp_path: Path) -> None:
    engine, path = store(tmp_path)
    held_lock(path, 0.3)
    token = _NOW_OR_NEVER.set(True)
    try:
        with pytest.raises(WouldWait), hot_transaction(engine) as db:
            db.exec_driver_sql("INSERT INTO calls VALUES (1)")
    finally:
        _NOW_OR_NEVER.reset(token)
    with hot_transaction(engine) as db:  # the busy timeout is back on this pooled connection: it waits, then writes
        db.exec_driver_sql("INSERT INTO calls VALUES (2)")
    with hot_transaction(engine) as db:
        assert [tuple(row) for row in db.exec_driver_sql("SELECT n FROM calls")] == [(2,)]


def test_postgresql_work_always_runs_in_a_thread(postgres: str) -> None:  # noqa: F811
    engine = open_engine(postgres)
    threads: list[int] = []

    async def main() -> None:
        await in_store(engine, lambda: threads.append(threading.get_ident()))

    asyncio.run(main())
    assert threads and threads[0] != threading.get_ident()
