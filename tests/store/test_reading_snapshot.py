"""A reading transaction sees one snapshot: what it reads by several statements stood together.

A run's chain is checked by reading its head, then its events; under PostgreSQL's default READ COMMITTED each
statement saw the latest commit, so a decision appended by another process between the two reads looked like an
event removed, and racing operators' decisions failed with LogChanged (found by the Postgres race test in CI).
"""

from __future__ import annotations

from sqlalchemy import text

from groundstate.store import open_engine, reading

from ..postgres import postgres  # noqa: F401 (the PostgreSQL fixture)


def test_a_commit_between_two_reads_is_not_seen_by_the_second(store_url: str) -> None:
    engine = open_engine(store_url)
    with engine.begin() as db:
        db.execute(text("DROP TABLE IF EXISTS snapshot_probe"))
        db.execute(text("CREATE TABLE snapshot_probe (n INTEGER)"))
        db.execute(text("INSERT INTO snapshot_probe VALUES (1)"))
    with reading(engine) as db:
        first = db.execute(text("SELECT count(*) FROM snapshot_probe")).scalar_one()
        with engine.begin() as other:  # another writer commits meanwhile
            other.execute(text("INSERT INTO snapshot_probe VALUES (2)"))
        second = db.execute(text("SELECT count(*) FROM snapshot_probe")).scalar_one()
    assert (first, second) == (1, 1)
    with reading(engine) as db:
        assert db.execute(text("SELECT count(*) FROM snapshot_probe")).scalar_one() == 2
    engine.dispose()
