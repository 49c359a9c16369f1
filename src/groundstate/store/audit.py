"""The store's record nobody can quietly edit: every write to a row of the MCP guard's ledger or of the tool journal
appends a link to one chain per store, and the chain's head may be signed with a key only the operator holds.

A link names the row (its table and key), what was done to it (``kind``: decided, settled, intent, done, …) and the
digest of the row's covered columns *as they stand after that write*, read back in the same transaction — so the
writer and ``verify`` compute it from the same stored values. It is chained: ``sha256(previous link, table, key,
kind, digest)``. ``verify`` walks the links in order (a link changed, removed, inserted or reordered breaks the walk
there), then checks every row against the last link that names it (a row changed since, removed, or written without
a link). Rows a table holds from before the chain was kept are counted, never guessed about.

Rows change legitimately (a held call is decided, an intent gets its result): each such write is a link of its own,
and only the row's latest link must match the row. Columns that are bookkeeping rather than record — which process
waits for a held call — are not covered.

With ``[audit] sign``, each write also signs the head: an HMAC of (sequence, link) with the key in the environment
variable ``[audit] key_env`` names. Anyone can recompute the chain from the database file; without the key nobody
can produce a signed head for a rewritten one. A writer without the key leaves the signature where it was: ``verify``
reports how many links came after the last signed head.

A chain shows what was changed after it was written; it cannot show that a database was replaced whole by an older
copy of itself. Keep the head ``verify --json`` prints somewhere else to pin it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Engine, Integer, MetaData, String, Table, Text, inspect

from .database import DriverSQL, Executes, NotText, create_tables, reading, within

STORE_CHAIN = "store"  # the one chain of a store's ledger and journal rows
GENESIS = ""

_TABLES = MetaData()
heads = Table(
    "audit_heads", _TABLES,
    Column("name", String(200), primary_key=True),
    Column("seq", Integer, nullable=False),  # the last link's place in the chain (0: none yet)
    Column("link", String(80), nullable=False),  # the last link ("" before the first)
    Column("signed_seq", Integer),  # the place of the last head signed with the operator's key
    Column("signature", String(100)),  # hmac-sha256 of (signed_seq, its link), with that key
)  # fmt: skip
links = Table(
    "audit_links", _TABLES,
    Column("chain", String(200), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("source", String(100), nullable=False),  # the table of the row written
    Column("row_key", Text, nullable=False),  # its key, as a JSON array
    Column("kind", String(40), nullable=False),  # what was done to it
    Column("digest", String(80), nullable=False),  # sha256 of the row's covered columns after the write
    Column("link", String(80), nullable=False),
)  # fmt: skip


@dataclass(frozen=True)
class Source:
    """A table whose rows are chained: its name, the columns of a row's key (named by the link itself) and the other
    columns a link covers."""

    table: str
    key: tuple[str, ...]
    covered: tuple[str, ...]

    def select_one(self) -> str:
        where = " AND ".join(f"{column} = ?" for column in self.key)
        return f"SELECT {', '.join(self.covered)} FROM {self.table} WHERE {where}"

    def select_all(self) -> str:
        return f"SELECT {', '.join(self.key + self.covered)} FROM {self.table}"


# The ledger's ``waiter`` (which process waits for a held call) is bookkeeping: not covered.
LEDGER = Source("mcp_decisions", ("id",), (
    "at", "call", "server", "tool", "arguments", "digest", "client", "decision", "reasons", "why", "status",
    "expires_at", "operator", "decided_at", "ended", "answered", "account", "policy", "shadow", "facts"))  # fmt: skip
JOURNAL = Source("tool_journal", ("scope", "position", "digest"), (
    "tool", "arguments", "state", "result", "holder", "started_at", "finished_at",
    "resolution"))  # fmt: skip
SOURCES = (LEDGER, JOURNAL)


def _value(value: Any) -> Any:
    """A stored value as a digest reads it (the driver's own: text, numbers, or a timestamp from PostgreSQL's; bytes,
    which groundstate never writes there, by their hex — so that a row edited to hold them is named, not a crash)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return "bytes:" + bytes(value).hex()
    return value


def row_digest(values: tuple[Any, ...] | list[Any]) -> str:
    """The digest of a row's covered columns, as the driver returned them."""
    text = json.dumps([_value(value) for value in values], ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def link_of(previous: str, source: str, row_key: str, kind: str, digest: str) -> str:
    """One link, chained to ``previous``."""
    text = json.dumps([previous, source, row_key, kind, digest], ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def signature_of(key: bytes, name: str, seq: int, link: str) -> str:
    """The signature of a chain's head: HMAC-SHA256 of its name, place and link with the operator's key."""
    message = json.dumps([name, seq, link], separators=(",", ":")).encode()
    return "hmac-sha256:" + hmac.new(key, message, hashlib.sha256).hexdigest()


class StoreChain:
    """Appends the links of one store's chain; ``touch`` in the transaction of every write it records."""

    def __init__(self, engine: Engine, key: bytes | None = None) -> None:
        """``key``: sign the head after every write (``[audit] sign``); None leaves the signature as it is."""
        self.engine, self.key = engine, key
        create_tables(engine, heads, links)
        driver = DriverSQL(engine)
        self._start = driver.sql("INSERT INTO audit_heads (name, seq, link) VALUES (?, 0, '') ON CONFLICT DO NOTHING")
        # Taking the head is the first write of the link: on PostgreSQL it locks the row, on SQLite every write
        # transaction holds the store's lock from its start. Two writers never link to the same head.
        self._take = driver.sql("UPDATE audit_heads SET seq = seq + 1 WHERE name = ? RETURNING seq, link")
        self._move = driver.sql("UPDATE audit_heads SET link = ? WHERE name = ?")
        self._sign = driver.sql("UPDATE audit_heads SET link = ?, signed_seq = ?, signature = ? WHERE name = ?")
        self._append = driver.sql("INSERT INTO audit_links (chain, seq, source, row_key, kind, digest, link) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?)")  # fmt: skip
        self._rows = {source.table: driver.sql(source.select_one()) for source in SOURCES}
        self._latest = driver.sql("SELECT digest, kind FROM audit_links WHERE chain = ? AND source = ? AND "
                                  "row_key = ? ORDER BY seq DESC LIMIT 1")  # fmt: skip
        with within(engine, None) as db:  # a row's latest link, found without reading the chain whole
            db.exec_driver_sql("CREATE INDEX IF NOT EXISTS audit_links_by_row ON audit_links (source, row_key, seq)")
        with within(engine, None) as db:
            db.exec_driver_sql(self._start, (STORE_CHAIN,))

    def changed(self, db: Executes, source: Source, key: tuple[Any, ...]) -> str | None:
        """How the row ``key`` of ``source`` differs, in ``db``, from what its latest link recorded — changed, or
        removed — else None. Read before groundstate acts on a row (runs an approved call, replays a recorded
        result, writes the row anew), so that an edit made between two of its writes is refused there instead of
        being acted on and then linked as if groundstate had made it. A row no link names (written before the chain
        was kept) is taken as it is, unless the chain is signed (``[audit] sign``): then every write links."""
        found = db.exec_driver_sql(self._rows[source.table], key).first()
        latest = db.exec_driver_sql(self._latest, (STORE_CHAIN, source.table, _key_text(key))).first()
        where = f"{source.table} row {_key_text(key)}"
        if latest is None:
            if found is not None and self.key is not None:
                return f"{where} carries no link though [audit] sign is on: it was written outside groundstate"
            return None
        if found is None:
            return f"{where} was removed outside groundstate (its last link: {latest[1]})"
        if row_digest(found) != latest[0]:
            return f"{where} was changed outside groundstate since its last link ({latest[1]})"
        return None

    def touch(self, db: Executes, source: Source, key: tuple[Any, ...], kind: str) -> None:
        """Link the row ``key`` of ``source`` as it stands now (``kind``: what was just done to it), in ``db``."""
        found = db.exec_driver_sql(self._rows[source.table], key).first()
        if found is None:
            return  # nothing was written (an update that matched no row): nothing to link
        seq, previous = db.exec_driver_sql(self._take, (STORE_CHAIN,)).first()
        row_key, digest = _key_text(key), row_digest(found)
        link = link_of(previous, source.table, row_key, kind, digest)
        db.exec_driver_sql(self._append, (STORE_CHAIN, seq, source.table, row_key, kind, digest, link))
        if self.key is None:
            db.exec_driver_sql(self._move, (link, STORE_CHAIN))
        else:
            db.exec_driver_sql(self._sign, (link, seq, signature_of(self.key, STORE_CHAIN, seq, link), STORE_CHAIN))


@dataclass(frozen=True)
class StoreVerdict:
    """What a store's chain says: ``ok``, how many links and rows it covers, the rows from before it, the signature's
    state, and — when broken — the first thing that does not fit."""

    ok: bool
    links: int
    rows: int
    unchained: int
    head: str
    signed: str  # "signed" (checked up to the head), "unsigned", "not checked: no key", or how the signature failed
    unsigned_tail: int = 0  # links after the last signed head
    where: str = ""  # the link or row that does not fit
    how: str = ""  # changed, removed, inserted, reordered
    detail: str = ""

    def __str__(self) -> str:
        if not self.ok and self.how == "unsigned":
            return f"store: not verified: {self.detail}"
        if not self.ok:
            return f"store: {self.where} was {self.how}: {self.detail}"
        before = (f"; {self.unchained} rows carry no link (written before the chain was kept, or their links were "
                  "removed: only a signed chain tells)") if self.unchained else ""  # fmt: skip
        tail = f" ({self.unsigned_tail} links after the last signed head)" if self.unsigned_tail else ""
        return (f"store: verified {self.links} links over {self.rows} ledger and journal rows, head "
                f"{self.head or '-'}, {self.signed}{tail}{before}")  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """As ``audit verify --json`` prints it."""
        return {"store": True, "ok": self.ok, "links": self.links, "rows": self.rows, "unchained": self.unchained,
                "head": self.head, "signed": self.signed, "unsigned_tail": self.unsigned_tail,
                "where": self.where or None, "how": self.how or None, "detail": self.detail or None}  # fmt: skip


@dataclass(frozen=True)
class _Link:
    seq: int
    source: str
    row_key: str
    kind: str
    digest: str
    link: str


def verify_store(engine: Engine, key: bytes | None = None, required: bool = False) -> StoreVerdict:
    """Recompute the store's chain from its links, then every ledger and journal row against the last link naming it;
    with ``key``, check the signed head too. ``required`` (``[audit] sign`` is on): rows without a link, a head
    without a signature or links after the last signed head fail — with signing on every write signs, so each of
    those is an edit (the chain removed whole, a signature removed or rolled back)."""
    present = set(inspect(engine).get_table_names())
    driver = DriverSQL(engine)
    with reading(engine) as db:
        rows: dict[str, dict[str, str]] = {}
        for source in SOURCES:
            if source.table not in present:
                continue
            try:
                rows[source.table] = {_key_text(row[: len(source.key)]): row_digest(row[len(source.key):])
                                      for row in db.exec_driver_sql(source.select_all())}  # fmt: skip
            except (NotText, ValueError, TypeError) as exc:  # a row groundstate did not write: changed, said
                return StoreVerdict(False, 0, 0, 0, "", "", 0, f"a row of {source.table}", "changed",
                                    f"it cannot be read ({exc})")  # fmt: skip
        total = sum(len(found) for found in rows.values())
        if "audit_heads" not in present or "audit_links" not in present:
            verdict = StoreVerdict(True, 0, total, total, "", "unsigned")
            return _required(verdict, required) if total else verdict
        head = db.exec_driver_sql(driver.sql("SELECT seq, link, signed_seq, signature FROM audit_heads WHERE name = ?"),
                                  (STORE_CHAIN,)).first()  # fmt: skip
        stored = list(db.exec_driver_sql(driver.sql(
            "SELECT seq, source, row_key, kind, digest, link FROM audit_links WHERE chain = ? ORDER BY seq"),
            (STORE_CHAIN,)))  # fmt: skip
    last_seq, last_link, signed_seq, signature = head if head is not None else (0, "", None, None)
    if not (isinstance(last_seq, int) and isinstance(last_link, str) and isinstance(signed_seq, int | None)
            and isinstance(signature, str | None)):  # fmt: skip
        return StoreVerdict(False, 0, total, 0, "", "", 0, "the chain's head", "changed",
                            "it holds values groundstate never writes there")  # fmt: skip
    misfit = next((row for row in stored if not (isinstance(row[0], int) and all(isinstance(v, str) for v in row[1:]))),
                  None)  # fmt: skip
    if misfit is not None:
        return StoreVerdict(False, len(stored), total, 0, last_link, "", 0, f"link {misfit[0]!r}", "changed",
                            "it holds values groundstate never writes there")  # fmt: skip
    chained = [_Link(*row) for row in stored]
    broken = _walk(chained, last_seq, last_link)
    if broken is not None:
        return StoreVerdict(False, len(chained), total, 0, last_link, "", 0, *broken)
    wrong = _rows_against(chained, rows)
    if wrong is not None:
        return StoreVerdict(False, len(chained), total, 0, last_link, "", 0, *wrong)
    named = {(entry.source, entry.row_key) for entry in chained}
    unchained = sum(1 for table, found in rows.items() for row_key in found if (table, row_key) not in named)
    signed, tail = _signature(chained, key, signed_seq, signature, last_seq)
    if signed.startswith("signature"):
        return StoreVerdict(False, len(chained), total, unchained, last_link, signed, tail, "the signed head",
                            "changed", signed)  # fmt: skip
    verdict = StoreVerdict(True, len(chained), total, unchained, last_link, signed, tail)
    return _required(verdict, required) if (unchained or tail or (chained and signed == "unsigned")) else verdict


def _required(verdict: StoreVerdict, required: bool) -> StoreVerdict:
    """With signing on, a store whose rows are not all under a signed head fails: say which way."""
    if not required:
        return verdict
    if verdict.unchained:
        why = f"{verdict.unchained} rows carry no link though [audit] sign is on"
    elif verdict.unsigned_tail:
        why = f"{verdict.unsigned_tail} links follow the last signed head though [audit] sign is on"
    else:
        why = "the chain's head carries no signature though [audit] sign is on"
    return replace(verdict, ok=False, where="the store", how="unsigned", detail=why)


def _key_text(key: Any) -> str:
    """A row's key as links name it (JSON), whatever the driver returned (bytes by their hex)."""
    return json.dumps([_value(value) for value in key], ensure_ascii=False)


def _walk(chained: list[_Link], last_seq: int, last_link: str) -> tuple[str, str, str] | None:
    """The first link that does not follow the one before it: (where, how, detail)."""
    previous, expected = GENESIS, 1
    for index, entry in enumerate(chained):
        where = f"link {entry.seq} ({entry.source} {entry.row_key}, {entry.kind})"
        if entry.seq > expected:
            return f"link {expected}", "removed", f"the chain goes from link {expected - 1} to link {entry.seq}"
        fits = link_of(previous, entry.source, entry.row_key, entry.kind, entry.digest) == entry.link
        if not fits:
            later = chained[index + 1] if index + 1 < len(chained) else None
            if later is not None and link_of(previous, later.source, later.row_key, later.kind,
                                             later.digest) == later.link:  # fmt: skip
                return where, "reordered" if _follows(entry, later) else "inserted", \
                    "it does not follow the link before it; the link after it does"  # fmt: skip
            return where, "changed", "its content is not what its link was computed from"
        previous, expected = entry.link, entry.seq + 1
    if last_seq != expected - 1 or last_link != previous:
        return f"link {expected}", "removed", \
            f"the chain's head names link {last_seq}; the chain ends at link {expected - 1}"  # fmt: skip
    return None


def _follows(entry: _Link, later: _Link) -> bool:
    """Whether ``entry`` follows ``later``: the two are in each other's place."""
    return link_of(later.link, entry.source, entry.row_key, entry.kind, entry.digest) == entry.link


def _rows_against(chained: list[_Link], rows: dict[str, dict[str, str]]) -> tuple[str, str, str] | None:
    """The first row that is not as its latest link says (changed, or removed), or a row written after the chain
    began without a link (inserted)."""
    latest: dict[tuple[str, str], _Link] = {}
    for entry in chained:
        latest[(entry.source, entry.row_key)] = entry
    by_digest = {(entry.source, entry.digest): entry for entry in latest.values()}
    for (table, row_key), entry in sorted(latest.items(), key=lambda item: item[1].seq):
        found = rows.get(table, {}).get(row_key)
        where = f"{table} row {row_key}"
        if found is None:
            return where, "removed", f"link {entry.seq} names it; the table no longer holds it"
        if found != entry.digest:
            other = by_digest.get((table, found))
            if other is not None:
                return where, "reordered", f"it holds what link {other.seq} says row {other.row_key} held"
            return where, "changed", f"it is not what link {entry.seq} ({entry.kind}) recorded"
    first_seen = _first_chained_keys(chained)
    for table, present in rows.items():
        for row_key in present:
            if (table, row_key) not in latest and _after_start(table, row_key, first_seen):
                return f"{table} row {row_key}", "inserted", "it was written after the chain began, without a link"
    return None


def _first_chained_keys(chained: list[_Link]) -> dict[str, Any]:
    """Per table, the smallest numeric key the chain names: ledger rows past it must be chained."""
    smallest: dict[str, Any] = {}
    for entry in chained:
        key = _loaded(entry.row_key)
        if isinstance(key, list) and len(key) == 1 and isinstance(key[0], int):
            smallest[entry.source] = min(smallest.get(entry.source, key[0]), key[0])
    return smallest


def _after_start(table: str, row_key: str, first_seen: dict[str, Any]) -> bool:
    """Whether an unlinked row must have been written after the chain began: a ledger row numbered past the first
    chained one. Journal rows carry no order of their own: an unlinked one is counted as written before."""
    key = _loaded(row_key)
    return table in first_seen and isinstance(key, list) and len(key) == 1 and isinstance(key[0], int) \
        and key[0] > first_seen[table]  # fmt: skip


def _loaded(row_key: str) -> Any:
    """A link's row key; None when it is not the JSON a link writes (the row it names is then not found)."""
    try:
        return json.loads(row_key)
    except ValueError:
        return None


def _signature(chained: list[_Link], key: bytes | None, signed_seq: int | None, signature: str | None,
               last_seq: int) -> tuple[str, int]:  # fmt: skip
    """The head's signature state and how many links came after the last signed head."""
    if signed_seq is None or signature is None:
        return "unsigned", 0
    tail = last_seq - signed_seq
    if key is None:
        return "signed, not checked: no key ([audit] key_env)", tail
    at = next((entry for entry in chained if entry.seq == signed_seq), None)
    if at is None:
        return f"signature names link {signed_seq}, which the chain does not hold", tail
    if not hmac.compare_digest(signature_of(key, STORE_CHAIN, signed_seq, at.link), signature):
        return f"signature of link {signed_seq} does not verify with the configured key", tail
    return f"signed (link {signed_seq}, checked)", tail
