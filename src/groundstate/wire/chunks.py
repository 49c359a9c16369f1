"""What the decoder emits, and its JSON inspection format (one object per chunk).

Plain slotted records (not frozen: the decoder builds one per chunk, and frozen ones cost several times more).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .constants import MODES, Mode


@dataclass(slots=True)
class Content:
    """Tokens of one mode, emitted at a CHUNK_END / mode boundary (boundary=True) or a FLUSH (False)."""

    stream: int
    mode: Mode
    tokens: tuple[int, ...]
    boundary: bool

    def to_json(self) -> dict[str, Any]:
        """The chunk as printed by ``groundstate wire decode``."""
        return {"stream": self.stream, "kind": MODES[self.mode], "tokens": list(self.tokens), "boundary": self.boundary}


@dataclass(slots=True)
class StreamEnd:
    """A stream ended (STREAM_END): its state is forgotten."""

    stream: int

    def to_json(self) -> dict[str, Any]:
        """The chunk as printed by ``groundstate wire decode``."""
        return {"stream": self.stream, "kind": "stream_end"}


@dataclass(slots=True)
class Reset:
    """The decoder returned to its ground state. ``dropped``: buffered tokens discarded as ambiguous;
    ``skipped_bytes``: input bytes discarded while resynchronising (frame-level resets, stream None)."""

    stream: int | None
    reason: str
    dropped: int = 0
    skipped_bytes: int = 0
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """The chunk as printed by ``groundstate wire decode``."""
        out: dict[str, Any] = {"stream": self.stream, "kind": "reset", "reason": self.reason, "dropped": self.dropped}
        if self.skipped_bytes:
            out["skipped_bytes"] = self.skipped_bytes
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(slots=True)
class UpstreamError:
    """A provider error carried in the stream (UPSTREAM_ERROR), as its JSON payload."""

    stream: int
    error: dict[str, Any] = field(hash=False)

    def to_json(self) -> dict[str, Any]:
        """The chunk as printed by ``groundstate wire decode``."""
        return {"stream": self.stream, "kind": "upstream_error", "error": self.error}


@dataclass(slots=True)
class Hello:
    """A stream's HELLO: the vocabulary it announces and the token table."""

    stream: int
    vocabulary: str
    hot_table: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        """The chunk as printed by ``groundstate wire decode``."""
        return {
            "stream": self.stream,
            "kind": "hello",
            "vocabulary": self.vocabulary,
            "hot_table": list(self.hot_table),
        }


Chunk = Content | StreamEnd | Reset | UpstreamError | Hello
