"""The memory tiers behind a control packet's ``memory_operations``.

- working: kernel facts (``session_note/2`` is the session tier, visible to policy, gone with the process);
- long-term: a SQLite table of key → value (``promote_to_long_term``), read by policy through
  ``query_learned(Key, Value)``;
- vector: embeddings in SQLite (``store_vector``), searched with numpy, read by policy through
  ``recall_similar(Query, Key, Score)``.

``forget`` removes exactly the entry with that key from every tier — never a prefix, never a neighbour.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ..logic import Float
from ..packets import MemoryOperation
from .kernel import Kernel, Transaction

_WORD = re.compile(r"\w+", re.UNICODE)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS long_term (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, text TEXT NOT NULL, embedding BLOB NOT NULL)",
)


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


class Memory:
    """``path`` None keeps the long-term and vector tiers in memory."""

    def __init__(self, path: str | Path | None = None, embedder: Embedder | None = None, *, top_k: int = 5) -> None:
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(":memory:" if path is None else str(path))
        for statement in _SCHEMA:
            self.db.execute(statement)
        self.embedder = embedder or HashingEmbedder()
        self.top_k = top_k
        self.kernels: list[Kernel] = []  # kernels whose policy reads this memory

    # -- the tiers -------------------------------------------------------------------------------------
    def promote(self, key: str, value: str) -> None:
        """Keep ``value`` under ``key`` in the long-term tier (replacing an earlier value)."""
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO long_term VALUES (?, ?)", (key, value))

    def recall(self, key: str) -> str | None:
        """The long-term value under ``key``, or None."""
        row = self.db.execute("SELECT value FROM long_term WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def store_vector(self, key: str, text: str) -> None:
        """Embed ``text`` and keep it under ``key`` in the vector tier."""
        vector = self.embedder.embed([text])[0].astype(np.float32)
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", (key, text, vector.tobytes()))

    def similar(self, query: str, top_k: int | None = None) -> list[tuple[str, float]]:
        """The keys whose texts are most similar to ``query``, best first, with their cosine scores."""
        rows = self.db.execute("SELECT key, embedding FROM vectors ORDER BY key").fetchall()
        if not rows:
            return []
        matrix = np.stack([np.frombuffer(blob, dtype=np.float32) for _, blob in rows])
        scores = matrix @ self.embedder.embed([query])[0]
        order = np.argsort(-scores, kind="stable")[: top_k or self.top_k]
        return [(rows[i][0], round(float(scores[i]), 6)) for i in order]

    def forget(self, key: str) -> int:
        """Remove exactly ``key`` from the long-term and vector tiers; returns how many entries went."""
        with self.db:
            removed = self.db.execute("DELETE FROM long_term WHERE key = ?", (key,)).rowcount
            removed += self.db.execute("DELETE FROM vectors WHERE key = ?", (key,)).rowcount
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
