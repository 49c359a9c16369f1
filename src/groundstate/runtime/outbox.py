"""The notifications outbox: every notification is a row in the store before it is sent, so none is lost when the
process that made it stops — the next groundstate process that starts with the same webhook sends what is still
pending.

A process claims a row for as long as all its attempts could take before it sends it, so two live processes do not
both send it; a claim whose process died lapses, and the row is sent again later under the same delivery id (the
receiver drops duplicates by ``X-Groundstate-Delivery``): delivery is at least once.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy import Column, DateTime, Engine, Integer, MetaData, String, Table, Text, insert, or_, select, update

from ..errors import StoreError
from ..store import create_tables, reading

log = logging.getLogger("groundstate.notify")

PENDING, DELIVERED, GIVEN_UP = "pending", "delivered", "given_up"

metadata = MetaData()
outbox = Table(
    "notification_outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("delivery", String(64), nullable=False, unique=True),
    Column("kind", String(20), nullable=False),
    Column("url", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("status", String(20), nullable=False, index=True),
    Column("claimed_until", DateTime(timezone=True)),
    Column("attempts", Integer, nullable=False),
    Column("last_error", Text),
)


class Outbox:
    """The rows of notifications: added before sending, claimed by the process that sends, closed when done."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        create_tables(engine, outbox)

    def add(self, delivery: str, kind: str, url: str, body: bytes) -> None:
        """A new notification, pending."""
        with self.engine.begin() as db:
            db.execute(insert(outbox).values(delivery=delivery, kind=kind, url=url, body=body.decode("utf-8"),
                                             created_at=datetime.now(UTC), status=PENDING, attempts=0))  # fmt: skip

    def claim(self, delivery: str, seconds: float) -> bool:
        """Take the pending notification for ``seconds`` (False: it is done, or another live process has it)."""
        now = datetime.now(UTC)
        with self.engine.begin() as db:
            taken = db.execute(update(outbox).where(
                outbox.c.delivery == delivery, outbox.c.status == PENDING,
                or_(outbox.c.claimed_until.is_(None), outbox.c.claimed_until < now),
            ).values(claimed_until=now + timedelta(seconds=seconds)))  # fmt: skip
        return taken.rowcount == 1

    def pending(self, url: str) -> list[tuple[str, str, bytes]]:
        """(delivery, kind, body) of every pending notification to ``url`` nobody holds, oldest first. A row that
        cannot be read (changed outside groundstate: bytes no UTF-8 text holds, a value of another type) is left
        where it is and logged — never a failure of the process that starts (every command builds a runtime)."""
        now = datetime.now(UTC)
        found = []
        with reading(self.engine) as db:
            ids = db.execute(select(outbox.c.id).where(
                outbox.c.url == url, outbox.c.status == PENDING,
                or_(outbox.c.claimed_until.is_(None), outbox.c.claimed_until < now),
            ).order_by(outbox.c.id)).scalars().all()  # fmt: skip
            for row_id in ids:
                try:
                    row = db.execute(select(outbox.c.delivery, outbox.c.kind, outbox.c.body)
                                     .where(outbox.c.id == row_id)).one()  # fmt: skip
                    if not all(isinstance(value, str) for value in row):
                        raise TypeError("a value that is not text")
                    found.append((row.delivery, row.kind, row.body.encode("utf-8")))
                except StoreError as exc:  # NotText: it says the column and how the store was changed
                    log.warning("notification %s in the outbox cannot be read: %s; left unsent", row_id, exc)
                except (ValueError, TypeError) as exc:
                    log.warning("notification %s in the outbox cannot be read (%s); the store was changed outside "
                                "groundstate; left unsent", row_id, exc)  # fmt: skip
        return found

    def close(self, delivery: str, status: str, attempts: int, error: str | None) -> None:
        """The notification was delivered, or given up after ``attempts`` (with the last error)."""
        with self.engine.begin() as db:
            db.execute(update(outbox).where(outbox.c.delivery == delivery).values(
                status=status, attempts=attempts, last_error=error, claimed_until=None))  # fmt: skip

    def status(self, delivery: str) -> tuple[str, int, str | None] | None:
        """(status, attempts, last error) of a notification, if it is in the outbox."""
        with reading(self.engine) as db:
            row = db.execute(select(outbox.c.status, outbox.c.attempts, outbox.c.last_error).where(
                outbox.c.delivery == delivery)).first()  # fmt: skip
        return None if row is None else (row.status, row.attempts, row.last_error)
