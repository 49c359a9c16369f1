"""The event store's appends and freshness checks run as the driver's own SQL: what they write reads back exactly as
the expression layer wrote it, on SQLite and on PostgreSQL, and the lease and lock checks hold the same way."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from groundstate.runtime import RUN_CREATED, RUN_STARTED, EventStore, LeaseLost, RunStarted


def test_appended_events_and_the_run_row_read_back_exactly(store_url: str) -> None:
    store = EventStore(store_url)
    run_id = store.create_run("flow", "name: flow\nagents: []\n", "m")
    before = datetime.now(UTC)
    store.acquire_lease(run_id, "me", 30)
    started = store.append(run_id, RunStarted(model="m", driver="me"), holder="me")
    fresh = EventStore(store_url)  # nothing cached: everything from the database
    [created, read] = fresh.events(run_id)
    expected = (2, RUN_STARTED, None, {"model": "m", "driver": "me"}, "runtime")
    assert (read.seq, read.type, read.agent, read.payload, read.actor) == expected
    assert read.at == started.at and read.at.tzinfo is not None and read.at >= before
    row = next(r for r in fresh.runs() if r["id"] == run_id)
    assert (row["status"], row["last_seq"], row["open_pauses"]) == ("running", 2, 0)
    assert fresh.state(run_id).status == "running" and created.type == RUN_CREATED


def test_an_append_by_a_driver_without_the_lease_writes_nothing(store_url: str) -> None:
    store = EventStore(store_url)
    run_id = store.create_run("flow", "name: flow\nagents: []\n", "m")
    with pytest.raises(LeaseLost):
        store.append(run_id, RunStarted(model="m"), holder="nobody")  # no lease at all
    store.acquire_lease(run_id, "first", 30)
    with pytest.raises(LeaseLost):
        store.append(run_id, RunStarted(model="m"), holder="second")  # someone else's lease
    assert [e.type for e in EventStore(store_url).events(run_id)] == [RUN_CREATED]


def test_on_sqlite_timestamps_are_stored_in_the_expression_layers_own_format(tmp_path: Path) -> None:
    """Listing orders runs by these texts: a driver-written one must sort like one SQLAlchemy wrote."""
    database = tmp_path / "gs.db"
    store = EventStore(f"sqlite:///{database}")
    run_id = store.create_run(
        "flow", "name: flow\nagents: []\n", "m"
    )  # created_at by SQLAlchemy, the rest by driver SQL
    with sqlite3.connect(database) as raw:
        created, updated = raw.execute("SELECT created_at, updated_at FROM runs WHERE id = ?", (run_id,)).fetchone()
        [at] = raw.execute("SELECT at FROM events WHERE run_id = ?", (run_id,)).fetchone()
    shape = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}")
    assert shape.fullmatch(created) and shape.fullmatch(updated) and shape.fullmatch(at), (created, updated, at)


def test_the_known_state_is_this_processs_own_and_state_asks_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gs.db'}"
    driver, console = EventStore(url), EventStore(url)  # two processes on one store
    run_id = driver.create_run("flow", "name: flow\nagents: []\n", "m")
    console.append(run_id, RunStarted(model="m"), actor="operator:ada")
    assert driver.known_state(run_id).last_seq == 1  # what the driver itself last wrote: no query
    assert driver.state(run_id).last_seq == 2  # asks the database, sees the other writer
    assert driver.known_state(run_id).last_seq == 2  # and keeps what it read
    assert EventStore(url).known_state(run_id).last_seq == 2  # nothing known yet: read
