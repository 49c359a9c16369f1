"""Opening the store's database the same way everywhere (the run store, the guard's ledger, operator accounts, the
tool journal): SQLite in WAL mode with a busy timeout and write transactions that take the lock at once, the file
private to its owner; PostgreSQL as given. SQLite hands back naive datetimes for timezone-aware columns: ``aware``
restores the UTC they were written in.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sqlalchemy import Column, Connection, Engine, Table, create_engine, event, inspect, make_url, select, text
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError, SQLAlchemyError

from ..errors import StoreError

BUSY_TIMEOUT_MS = 10_000  # how long a SQLite writer waits for another's lock before it fails
_NOW_OR_NEVER: ContextVar[bool] = ContextVar("groundstate_store_now_or_never", default=False)  # see in_store
T = TypeVar("T")


class NotText(StoreError):
    """A stored row holds bytes in a text column that are not UTF-8 — which groundstate never writes, so the
    database was changed outside it. ``column`` names the column; the caller that knows which row it was reading
    (a run's event, a journal entry) says so in the error it raises from this one."""

    def __init__(self, column: str) -> None:
        super().__init__(f"a stored {column!r} is not UTF-8 text; the database was changed outside groundstate")
        self.column = column


class WouldWait(StoreError):
    """A write transaction asked to begin only if SQLite's write lock was free found another connection holding it;
    nothing was done (``in_store`` then runs the work in a worker thread, where waiting blocks nobody)."""


def open_engine(url: str) -> Engine:
    """An engine for ``url``; a SQLite file is created readable by its owner only (0600), with its journal files.

    A URL that names no database groundstate can open is a StoreError naming it (``--db`` is the operator's typing,
    never a traceback); ``postgresql://`` means the psycopg driver groundstate ships, and a server that does not
    answer is given up after ``CONNECT_TIMEOUT_S`` rather than waited on for the operating system's minutes."""
    try:
        engine = create_engine(_with_driver(url), future=True, **_connect_args(url))
    except (ArgumentError, NoSuchModuleError, ImportError, ValueError) as exc:
        raise StoreError(f"{where(url)}: not a database URL groundstate can open ({_first_line(exc)}); give "
                         "sqlite:///PATH or postgresql://USER@HOST/DATABASE") from None  # fmt: skip
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        event.listen(engine, "handle_error", _sqlite_not_text)
        try:
            private_sqlite_file(engine.url.database)
        except OSError as exc:
            raise StoreError(f"{where(url)}: cannot create or open the database file ({exc.strerror})") from None
    return engine


CONNECT_TIMEOUT_S = 10  # how long opening a PostgreSQL store waits for its server


def where(url: str) -> str:
    """The store as the operator named it, for a message: a SQLite file's path, else the URL without its password."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return repr(url[:200])
    if parsed.drivername.startswith("sqlite"):
        return str(parsed.database or ":memory:")
    return parsed.render_as_string(hide_password=True)


def _with_driver(url: str) -> str:
    """``postgresql://`` and ``postgres://`` with the driver groundstate depends on (psycopg 3), not SQLAlchemy's
    default (psycopg2, which is not installed)."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+psycopg://" + url[len(plain) :]
    return url


def _connect_args(url: str) -> dict[str, Any]:
    if url.startswith("postgres") and "connect_timeout" not in url:
        return {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
    return {}


def _first_line(exc: BaseException) -> str:
    """What a driver said, without SQLAlchemy's statement echo and background link: the first line of its message."""
    cause = getattr(exc, "orig", None) or exc
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0][:300]


def create_tables(engine: Engine, *tables: Table) -> None:
    """Create ``tables`` if missing; a table written by an earlier version gets the columns added since (nullable),
    so upgrading keeps every row. A database that cannot be read (a file that is not SQLite, a server that does not
    answer) or that holds a table of the same name that is not groundstate's is a StoreError naming the database and
    the problem — and a table of another program is never altered."""
    try:
        _create_tables(engine, tables)
    except SQLAlchemyError as exc:
        url = engine.url.render_as_string(hide_password=False)
        if isinstance(exc, DatabaseError) and "file is not a database" in str(exc):
            raise StoreError(f"{where(url)}: not a SQLite database (the file holds something else)") from None
        if isinstance(exc, OperationalError) and engine.dialect.name != "sqlite":
            raise StoreError(f"{where(url)}: cannot reach the database ({_first_line(exc)})") from None
        raise StoreError(f"{where(url)}: cannot be used as groundstate's store ({_first_line(exc)})") from None


def _create_tables(engine: Engine, tables: tuple[Table, ...]) -> None:
    _refuse_foreign(engine, tables)  # before anything is created: another program's database is left as it was
    for table in tables:
        table.create(engine, checkfirst=True)
        present = {column["name"] for column in inspect(engine).get_columns(table.name)}
        for index in table.indexes:  # an index added since the table was created
            index.create(engine, checkfirst=True)
        with engine.begin() as db:
            for column in table.columns:
                if column.name not in present:
                    db.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column.name} "
                                    f"{column.type.compile(engine.dialect)}"))  # fmt: skip
    if engine.dialect.name == "sqlite":
        private_sqlite_file(engine.url.database)  # the -wal and -shm files too, now they exist


def _refuse_foreign(engine: Engine, tables: tuple[Table, ...]) -> None:
    """StoreError if a table of one of these names exists and is not groundstate's. Every column that may not be NULL
    has been in its table since the table was first written (the columns added since are nullable), so a table that
    lacks one is another program's, never an earlier version of ours."""
    inspector = inspect(engine)
    existing = set(inspector.get_table_names())
    for table in tables:
        if table.name not in existing:
            continue
        present = {column["name"] for column in inspector.get_columns(table.name)}
        missing = sorted(column.name for column in table.columns if not column.nullable and column.name not in present)
        if missing:
            url = engine.url.render_as_string(hide_password=False)
            raise StoreError(f"{where(url)}: its table {table.name!r} is not groundstate's (it has no column "
                             f"{', '.join(missing)}): not a groundstate store")  # fmt: skip


class DriverSQL:
    """Hot statements as the database driver's own SQL, for the paths that run one per event or per tool call:
    going through SQLAlchemy's expression layer cost more per statement than the database did (bench/runtime,
    bench/mcp). Values cross as the columns' own types convert them, so rows read back exactly as the expression
    layer writes and reads them."""

    def __init__(self, engine: Engine) -> None:
        self.dialect = engine.dialect
        self._mark = "?" if self.dialect.paramstyle == "qmark" else "%s"  # SQLite's driver, or psycopg's

    def sql(self, statement: str) -> str:
        """``statement`` written with ``?`` placeholders, in the driver's own."""
        return statement.replace("?", self._mark)

    def writer(self, column: Column[Any]) -> Callable[[Any], Any]:
        """How ``column``'s type hands a value to the driver (SQLite: a timestamp as text; psycopg: as it is)."""
        bind = column.type.dialect_impl(self.dialect).bind_processor(self.dialect)
        return bind if bind is not None else _unchanged

    def reader(self, column: Column[Any]) -> Callable[[Any], Any]:
        """How ``column``'s type turns what the driver returns into a value (SQLite: text back to a timestamp)."""
        result = column.type.dialect_impl(self.dialect).result_processor(self.dialect, None)
        return result if result is not None else _unchanged


def _unchanged(value: Any) -> Any:
    return value


class Executes(Protocol):
    """What the per-call statements need of a transaction: the driver's own SQL, run (a SQLAlchemy ``Connection``
    or a ``HotTransaction``)."""

    def exec_driver_sql(self, statement: str, parameters: Any = ...) -> Any:
        """Run ``statement`` (the driver's own SQL) with ``parameters``; its rows, if any."""


class HotRows:
    """A statement's rows, fetched at once (the cursor is the next statement's)."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def first(self) -> tuple[Any, ...] | None:
        """The first row, or None."""
        return self._rows[0] if self._rows else None

    def scalar_one(self) -> Any:
        """The first value of the one row there must be."""
        [(value, *_)] = self._rows
        return value

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)


class HotTransaction:
    """A write transaction on one of the engine's pooled driver connections, without SQLAlchemy's connection and
    result layers: four statements and a commit cost ~150 µs through them and ~40 µs here (the MCP guard's admission
    and a call's result run one each per call — bench/mcp)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def exec_driver_sql(self, statement: str, parameters: Any = ()) -> HotRows:
        """Run ``statement`` (the driver's own SQL) with ``parameters`` in this transaction; its rows, fetched."""
        cursor = self._connection.cursor()
        try:
            cursor.execute(statement, parameters)
            return HotRows(cursor.fetchall() if cursor.description is not None else [])
        finally:
            cursor.close()

    def exec_many(self, statement: str, rows: list[Any]) -> None:
        """Run ``statement`` once for each of ``rows`` (the driver's ``executemany``: one call for all of them — a
        run's guard reports, ten a batch, cost a statement each before)."""
        if rows:
            cursor = self._connection.cursor()
            try:
                cursor.executemany(statement, rows)
            finally:
                cursor.close()


@contextmanager
def hot_transaction(engine: Engine) -> Iterator[HotTransaction]:
    """A ``HotTransaction`` on ``engine``, committed when the block ends (rolled back if it raises); on SQLite it
    begins ``IMMEDIATE``, as every write transaction of the store does."""
    connection = engine.raw_connection()
    try:
        with _committed(connection, sqlite=engine.dialect.name == "sqlite") as db:
            yield db
    finally:
        connection.close()  # back to the pool


@contextmanager
def _committed(connection: Any, sqlite: bool) -> Iterator[HotTransaction]:
    """A ``HotTransaction`` on a driver connection (pooled or held), committed when the block ends, rolled back if it
    raises; on SQLite begun ``IMMEDIATE`` first (WouldWait, with nothing begun, when it may not wait and another
    connection holds the lock)."""
    if sqlite:
        _begin_immediate(connection, wait=not _NOW_OR_NEVER.get())
    try:
        yield HotTransaction(connection)
        connection.commit()
    except BaseException:
        connection.rollback()
        raise


class HeldConnection:
    """One SQLite driver connection a store keeps for its hottest statements — a run's appends and the freshness
    check of every state read — instead of taking one from the pool for each: the pool's checkout and return cost more
    than such a statement (a freshness check: ~30 µs through the pool in a busy run, ~8 µs here; bench/runtime).
    Used under its own lock, from any thread. PostgreSQL keeps the pool (a held network connection can go stale), and
    so does an in-memory SQLite database (each connection is its own database: ``of`` gives None for both)."""

    @classmethod
    def of(cls, engine: Engine) -> HeldConnection | None:
        """A held connection for a SQLite file's engine; None for any other database."""
        database = engine.url.database or ""
        in_memory = database in ("", ":memory:") or database.startswith("file::memory:") or "mode=memory" in database
        return cls(engine) if engine.dialect.name == "sqlite" and not in_memory else None

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._connection: Any = None

    def _driver(self) -> Any:
        if self._connection is None:
            pooled = self._engine.raw_connection()  # opened as every connection is (WAL, busy timeout, private file)
            pooled.detach()  # ours from now on: the pool neither resets it nor hands it to anybody else
            self._connection = pooled.dbapi_connection
        return self._connection

    @contextmanager
    def transaction(self) -> Iterator[HotTransaction]:
        """As ``hot_transaction``, on the held connection (while no other thread uses it)."""
        with self._lock, _committed(self._driver(), sqlite=True) as db:
            yield db

    def first(self, statement: str, parameters: Any = ()) -> tuple[Any, ...] | None:
        """The first row of a read (the driver's own SQL), outside any transaction: SQLite reads the last commit."""
        with self._lock:
            cursor = self._driver().cursor()
            try:
                cursor.execute(statement, parameters)
                row: tuple[Any, ...] | None = cursor.fetchone()
                return row
            finally:
                cursor.close()


def _begin_immediate(connection: Any, wait: bool) -> None:
    """``BEGIN IMMEDIATE``; without ``wait``, WouldWait at once if another connection holds the write lock."""
    cursor = connection.cursor()
    try:
        if wait:
            cursor.execute("BEGIN IMMEDIATE")
            return
        cursor.execute("PRAGMA busy_timeout=0")
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:  # the primary code: extended ones are BUSY too
                raise
            raise WouldWait("another connection holds the store's write lock") from None
        finally:
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    finally:
        cursor.close()


async def in_store(engine: Engine, work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` — a short piece of work whose first step is one ``hot_transaction`` of ``engine`` — on the
    event loop when it cannot wait: on SQLite whose write lock is free this instant (the MCP guard's admission and
    a call's result: a worker thread's two hops cost more than the transaction, bench/mcp). When another connection
    holds the lock, and always on PostgreSQL (whose statements are network round trips), it runs in a worker thread
    as before, so the loop never waits for another process."""
    if engine.dialect.name == "sqlite":
        now_or_never = _NOW_OR_NEVER.set(True)
        try:
            return work(*args)
        except WouldWait:
            pass  # nothing was done: the transaction did not begin
        finally:
            _NOW_OR_NEVER.reset(now_or_never)
    return await asyncio.to_thread(work, *args)


_READS_ONLY = "groundstate_reads_only"


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A connection that only reads, in one snapshot: what it reads by several statements (a run's head and its
    events, a row and the log it caches) stood together. On SQLite its transaction begins deferred — a snapshot of
    the last commit, without the write lock every other transaction takes at once (``BEGIN IMMEDIATE``): a console
    polling runs, a ``status`` or a ``runs list`` never holds up a driver's append. On PostgreSQL it is REPEATABLE
    READ (under READ COMMITTED each statement sees the latest commit: a decision appended between reading a run's
    head and its events looked like an event removed); a transaction that only reads is never refused for it."""
    with engine.connect() as db:
        db.execution_options(**{_READS_ONLY: True})
        if db.dialect.name == "postgresql":
            db.execution_options(isolation_level="REPEATABLE READ")  # reset when the connection goes back to the pool
        yield db


@contextmanager
def within(engine: Engine, db: Executes | None) -> Iterator[Executes]:
    """``db``, a transaction the caller holds and commits (several stores' writes in one: the MCP guard's admission),
    or else a ``hot_transaction`` of ``engine``'s own, committed when the block ends."""
    if db is not None:
        yield db
        return
    with hot_transaction(engine) as own:
        yield own


def aware(moment: datetime) -> datetime:
    """A datetime read back from the store, in UTC (SQLite returns it naive; it was written in UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def private_sqlite_file(database: str | None) -> None:
    """The database holds every prompt, output, decision and token hash: readable by its owner only (0600)."""
    if not database or database == ":memory:":
        return
    path = Path(database)
    for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if not candidate.exists():
            if candidate == path:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            continue
        os.chmod(candidate, 0o600)


def _sqlite_begin(connection: Any) -> None:
    if connection.get_execution_options().get(_READS_ONLY):
        connection.exec_driver_sql("BEGIN")  # a snapshot, no lock: readers never hold the lock writers wait for
    else:
        connection.exec_driver_sql("BEGIN IMMEDIATE")  # take the write lock at once: no stale read before a write


def rows_apart(db: Connection, table: Table, key: Column[Any]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Every row of ``table`` as a dict — and apart, each row that cannot be read, as (its ``key`` as printable
    text, why): bytes no UTF-8 text holds, or a value the column's type cannot take (``created_at = 'garbage'``).
    SQLite keeps whatever was written into it, so one row changed outside groundstate must not make the whole
    table unreadable; the rows are first read at once, and one by one (by ``rowid``) only when that fails. Other
    databases check types and encodings as they store: there a failure is raised as it is."""
    try:
        return [dict(row) for row in db.execute(select(table)).mappings()], []
    except (NotText, ValueError, TypeError, OverflowError):
        if db.dialect.name != "sqlite":
            raise
    readable, apart = [], []
    found = db.execute(text(f"SELECT rowid, CAST({key.name} AS BLOB) FROM {table.name} ORDER BY rowid")).all()
    for rowid, raw in found:
        try:
            row = db.execute(select(table).where(text("rowid = :rowid").bindparams(rowid=rowid))).mappings().one()
            readable.append(dict(row))
        except (NotText, ValueError, TypeError, OverflowError) as exc:
            apart.append((printable(raw), _first_line(exc)))
    return readable, apart


def printable(value: Any, most: int = 200) -> str:
    """``value`` as one line a terminal shows as it is: bytes decoded (what is no UTF-8 escaped), control characters
    — an escape sequence, a carriage return, a newline — written as escapes, at most ``most`` characters."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    shown = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(value))
    return shown if len(shown) <= most else shown[: most - 1] + "…"


_UNDECODABLE = re.compile(r"Could not decode to UTF-8 column '([^']*)'")  # CPython's sqlite3, fixed wording


def _sqlite_not_text(context: Any) -> None:
    """SQLite stores whatever bytes it is given as TEXT; the driver then fails on a row's undecodable column while
    the rows are read, with a message quoting the bytes. That is a NotText naming the column (never the bytes, never
    the driver's traceback); any other error is left to SQLAlchemy."""
    found = _UNDECODABLE.match(str(context.original_exception))
    if isinstance(context.original_exception, sqlite3.OperationalError) and found:
        raise NotText(found.group(1)[:64]) from None


def _sqlite_pragmas(connection: Any, _: Any) -> None:
    connection.isolation_level = None  # SQLAlchemy's begin event issues BEGIN IMMEDIATE instead of pysqlite
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")  # a second process waits for the lock, not fails
    cursor.close()
