"""Agents' memory in runs: the long-term and vector tiers live in the run store's database (SQLite or PostgreSQL),
so what one run's agents remember is there for the next run's; the run's own notes live in its event log."""

from __future__ import annotations

from typing import Any

from ..config import MemoryConfig
from ..kernel import Memory, MiniLMEmbedder


def open_memory(config: MemoryConfig, engine: Any) -> Memory | None:
    """The stored tiers ``[memory]`` asks for, in ``engine``'s database; None when ``long_term`` is off."""
    if not config.long_term:
        return None
    if config.embedder == "minilm":
        return Memory(engine, MiniLMEmbedder(), top_k=config.recall or 1)
    return Memory(engine, top_k=config.recall or 1)
