"""The memory tiers behind a control packet's ``memory_operations``.

- working: kernel facts (``session_note/2`` is the session tier, visible to policy, gone with the process);
- long-term: a table of key → value (``promote_to_long_term``), read by policy through ``query_learned(Key, Value)``;
- vector: embeddings in a table (``store_vector``), searched with numpy, read by policy through
  ``recall_similar(Query, Key, Score)``.

The two stored tiers live in any SQLAlchemy database: a SQLite file of their own, or the run store's database
(SQLite or PostgreSQL), so that memory written in one run is there for the next, wherever runs are kept.

``forget`` removes exactly the entry with that key from every tier — never a prefix, never a neighbour.

Reads of the stored tiers (the most recent long-term entries, the vector search) come from a snapshot of both
tables, read again after every write through this ``Memory`` and at most ``stale_after`` seconds (2) after the last
read: every agent invocation used to read both tables, twice per node of a workflow; now another process's writes
are seen within two seconds and this process's own at once.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import numpy as np
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    select,
)
from sqlalchemy.pool import StaticPool

from ..logic import Float
from ..packets import MemoryOperation
from ..store import reading
from .kernel import Kernel, Transaction

_WORD = re.compile(r"\w+", re.UNICODE)
_TABLES = MetaData()
LONG_TERM = Table(
    "memory_long_term",
    _TABLES,
    Column("key", String(512), primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
VECTORS = Table("memory_vectors", _TABLES, Column("key", String(512), primary_key=True),
                Column("text", Text, nullable=False), Column("embedding", LargeBinary, nullable=False),
                Column("updated_at", DateTime(timezone=True), nullable=False))  # fmt: skip


class Embedder(Protocol):
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text."""


class HashingEmbedder:
    """The built-in embedder: words and character trigrams hashed into a fixed space. Offline, deterministic,
    no model — similar wording scores high, meaning without shared words does not (use MiniLM for that)."""

    def __init__(self, dimension: int = 512) -> None:
        self.dimension = dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length vector per text."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            grams = [w[i : i + 3] for w in (f" {w} " for w in words) for i in range(len(w) - 2)]
            for feature, weight in [*((w, 1.0) for w in words), *((g, 0.5) for g in grams)]:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % self.dimension
                out[row, index] += weight if digest[4] & 1 else -weight
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


STALE_AFTER = 2.0


@dataclass(frozen=True)
class _Snapshot:
    """The stored tiers as read at ``read_at`` (monotonic seconds): long-term entries newest first, the vector
    tier's keys (in the matrix's row order), texts and embeddings."""

    read_at: float
    long_term: list[tuple[str, str]]
    keys: list[str]
    texts: dict[str, str]
    matrix: np.ndarray | None


class Memory:
    """The tiers in ``where``: a SQLite file's path, a SQLAlchemy engine (the run store's), or None (in memory)."""

    def __init__(
        self, where: str | Path | Engine | None = None, embedder: Embedder | None = None, *, top_k: int = 5
    ) -> None:
        if isinstance(where, Engine):
            self.engine = where
        elif where is None:
            self.engine = create_engine("sqlite://", poolclass=StaticPool)  # one connection: one in-memory database
        else:
            Path(where).parent.mkdir(parents=True, exist_ok=True)
            self.engine = create_engine(f"sqlite:///{where}")
        _TABLES.create_all(self.engine)
        self.embedder = embedder or HashingEmbedder()
        self.top_k = top_k
        self.kernels: list[Kernel] = []  # kernels whose policy reads this memory
        self.stale_after = STALE_AFTER  # seconds before another process's writes are read (see the module's doc)
        self._snapshot: _Snapshot | None = None

    # -- the tiers -------------------------------------------------------------------------------------
    def promote(self, key: str, value: str) -> None:
        """Keep ``value`` under ``key`` in the long-term tier (replacing an earlier value)."""
        self._replace(LONG_TERM, key, {"value": value})

    def recall(self, key: str) -> str | None:
        """The long-term value under ``key``, or None."""
        with reading(self.engine) as db:
            value = db.execute(select(LONG_TERM.c.value).where(LONG_TERM.c.key == key)).scalar()
        return None if value is None else str(value)

    def long_term(self, limit: int) -> list[tuple[str, str]]:
        """The ``limit`` most recently written long-term entries, newest first."""
        return self._fresh().long_term[:limit]

    def text(self, key: str) -> str | None:
        """The vector tier's text under ``key``, or None."""
        return self._fresh().texts.get(key)

    def store_vector(self, key: str, text: str) -> None:
        """Embed ``text`` and keep it under ``key`` in the vector tier."""
        vector = self.embedder.embed([text])[0].astype(np.float32)
        self._replace(VECTORS, key, {"text": text, "embedding": vector.tobytes()})

    def _replace(self, table: Table, key: str, values: dict[str, object]) -> None:
        """Write the row under ``key`` (replacing an earlier one) in one transaction, on any database."""
        row = {"key": key, **values, "updated_at": datetime.now(UTC)}
        self._snapshot = None
        with self.engine.begin() as db:
            db.execute(delete(table).where(table.c.key == key))
            db.execute(table.insert().values(**row))

    def similar(self, query: str, top_k: int | None = None) -> list[tuple[str, float]]:
        """The keys whose texts are most similar to ``query``, best first, with their cosine scores."""
        snapshot = self._fresh()
        if snapshot.matrix is None:
            return []
        scores = snapshot.matrix @ self.embedder.embed([query])[0]
        order = np.argsort(-scores, kind="stable")[: top_k or self.top_k]
        return [(snapshot.keys[i], round(float(scores[i]), 6)) for i in order]

    def _fresh(self) -> _Snapshot:
        """Both stored tiers as last read, read again when written through here or older than ``stale_after``."""
        now = time.monotonic()
        snapshot = self._snapshot
        if snapshot is None or now - snapshot.read_at > self.stale_after:
            newest_first = LONG_TERM.c.updated_at.desc(), LONG_TERM.c.key
            with reading(self.engine) as db:
                entries = [(str(k), str(v)) for k, v in db.execute(select(LONG_TERM.c.key, LONG_TERM.c.value)
                                                                   .order_by(*newest_first))]  # fmt: skip
                vectors = [(str(k), str(t), bytes(b)) for k, t, b in db.execute(
                    select(VECTORS.c.key, VECTORS.c.text, VECTORS.c.embedding).order_by(VECTORS.c.key))]  # fmt: skip
            matrix = np.stack([np.frombuffer(blob, dtype=np.float32) for _, _, blob in vectors]) if vectors else None
            snapshot = self._snapshot = _Snapshot(now, entries, [k for k, _, _ in vectors],
                                                  {k: t for k, t, _ in vectors}, matrix)  # fmt: skip
        return snapshot

    def forget(self, key: str) -> int:
        """Remove exactly ``key`` from the long-term and vector tiers; returns how many entries went."""
        self._snapshot = None
        with self.engine.begin() as db:
            removed = db.execute(delete(LONG_TERM).where(LONG_TERM.c.key == key)).rowcount
            removed += db.execute(delete(VECTORS).where(VECTORS.c.key == key)).rowcount
        return int(removed)

    # -- wiring into a kernel --------------------------------------------------------------------------
    def attach(self, kernel: Kernel) -> None:
        """Serve ``query_learned/2`` and ``recall_similar/3`` to the kernel's policy."""
        kernel.set_external("query_learned", lambda key: [] if (v := self.recall(key)) is None else [(v,)])
        kernel.set_external("recall_similar", lambda query: [(k, Float(s)) for k, s in self.similar(query)])
        self.kernels.append(kernel)

    def stage(self, kernel: Kernel, tx: Transaction, operations: Sequence[MemoryOperation]) -> None:
        """The working-tier side of ``operations``, added to the turn's transaction."""
        for op in operations:
            if op.op in ("note", "forget", "promote_to_long_term"):  # a promoted note leaves working memory
                tx.retract("session_note", *(row for row in kernel.engine.base["session_note"] if row[0] == op.key))
            if op.op == "note":
                tx.assert_("session_note", (op.key, op.value))

    def commit(self, operations: Sequence[MemoryOperation]) -> None:
        """The stored tiers' side, before the turn's evaluation so that policy sees it."""
        for op in operations:
            if op.op == "promote_to_long_term":
                self.promote(op.key, op.value)
            elif op.op == "store_vector":
                self.store_vector(op.key, op.value)
            elif op.op == "forget":
                self.forget(op.key)
        if any(op.op != "note" for op in operations):
            for kernel in self.kernels:
                kernel.externals_changed()
