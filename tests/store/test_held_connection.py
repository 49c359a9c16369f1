"""On SQLite the event store's appends and state reads run on one connection it holds (store.HeldConnection), not on
one taken from the pool each time: after the first, none comes from the pool; a read still sees every other
connection's last commit (nothing holds an old snapshot); threads share it safely; a failed transaction leaves it
clean."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event, text

from groundstate.runtime import (
    RUN_CREATED,
    RUN_STARTED,
    AgentStarted,
    EventStore,
    NodeCreated,
    RunStarted,
    ToolCall,
)
from groundstate.store import HeldConnection, open_engine

FLOW = "name: flow\nagents:\n  - id: writer_a\n    instructions: x\n"


def started(tmp_path: Path) -> tuple[EventStore, str]:
    store = EventStore(f"sqlite:///{tmp_path / 'gs.db'}")
    run_id = store.create_run("flow", FLOW, None)
    store.append(run_id, NodeCreated(agent="writer_a"))
    store.append(run_id, RunStarted())
    store.append(run_id, AgentStarted(attempt=1), "writer_a")
    return store, run_id


def call(store: EventStore, run_id: str, i: int) -> None:
    store.append(run_id, ToolCall(tool="web_search", target=str(i), payload=""), "writer_a")


def test_appends_and_state_reads_take_no_connection_from_the_pool(tmp_path: Path) -> None:
    store, run_id = started(tmp_path)
    checkouts: list[object] = []
    event.listen(store.engine, "checkout", lambda *args: checkouts.append(args))
    for i in range(20):
        call(store, run_id, i)
        assert store.state(run_id).last_seq == 5 + i
    assert checkouts == []


def test_a_state_read_sees_what_another_connection_committed_since(tmp_path: Path) -> None:
    store, run_id = started(tmp_path)
    other = EventStore(store.url)  # another process's store on the same file
    for i in range(3):
        assert store.state(run_id).last_seq == 4 + 2 * i
        call(other, run_id, 2 * i)
        assert store.state(run_id).last_seq == 5 + 2 * i  # not the snapshot of the read before
        call(store, run_id, 2 * i + 1)  # and its own append follows the other's, not a stale state
    assert [e.seq for e in EventStore(store.url).events(run_id)] == list(range(1, 11))


def test_threads_share_the_held_connection(tmp_path: Path) -> None:
    store, run_id = started(tmp_path)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(40):
                call(store, run_id, offset + i)
                store.state(run_id)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(100 * t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stored = EventStore(store.url).events(run_id)
    assert [e.seq for e in stored] == list(range(1, 4 + 160 + 1))
    assert sorted(int(e.payload["target"]) for e in stored[4:]) == sorted(
        100 * t + i for t in range(4) for i in range(40)
    )


def test_a_failed_transaction_leaves_the_connection_clean(tmp_path: Path) -> None:
    store, run_id = started(tmp_path)

    def half_then_refuse(_state: object) -> Iterator[tuple[ToolCall, str | None]]:
        yield ToolCall(tool="web_search", target="written, then rolled back", payload=""), "writer_a"
        raise RuntimeError("the builder refuses after one event was inserted")

    with pytest.raises(RuntimeError):
        store.transact(run_id, half_then_refuse)  # type: ignore[arg-type]
    call(store, run_id, 1)  # the held connection is usable, with nothing of the refused transaction in it
    stored = EventStore(store.url).events(run_id)
    assert [(e.seq, e.payload.get("target")) for e in stored[4:]] == [(5, "1")]


def test_a_read_waits_for_a_transaction_another_thread_has_open(tmp_path: Path) -> None:
    """Without the held connection's lock, the read would run inside the other thread's transaction and see its
    uncommitted row."""
    engine = open_engine(f"sqlite:///{tmp_path / 'held.db'}")
    with engine.begin() as db:
        db.execute(text("CREATE TABLE t (v INTEGER)"))
        db.execute(text("INSERT INTO t VALUES (1)"))
    held = HeldConnection(engine)
    inside, release, seen = threading.Event(), threading.Event(), []

    def writer() -> None:
        with held.transaction() as db:
            db.exec_driver_sql("UPDATE t SET v = 2")
            inside.set()
            release.wait(5)

    writing = threading.Thread(target=writer)
    writing.start()
    assert inside.wait(5)
    reading = threading.Thread(target=lambda: seen.append(held.first("SELECT v FROM t")))
    reading.start()
    reading.join(0.3)
    assert seen == []  # waiting for the transaction to end
    release.set()
    writing.join(5)
    reading.join(5)
    assert seen == [(2,)]  # and then it reads the commit


def test_an_in_memory_store_keeps_using_its_one_database(tmp_path: Path) -> None:
    """Each connection to an in-memory SQLite database is a database of its own: a held connection would split the
    store in two, so none is held and everything stays on the pool's one connection."""
    store = EventStore("sqlite://")
    first = store.create_run("flow", FLOW, None)
    store.append(first, RunStarted())
    second = store.create_run("flow", FLOW, None)
    assert [e.type for e in store.events(first)] == [RUN_CREATED, RUN_STARTED]
    assert {row["id"] for row in store.runs()} == {first, second}
    assert HeldConnection.of(store.engine) is None
    assert HeldConnection.of(EventStore(f"sqlite:///{tmp_path / 'file.db'}").engine) is not None
