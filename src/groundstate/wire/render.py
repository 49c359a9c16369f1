"""Chunks as text for people: one line per chunk, tokens detokenised with the stream's vocabulary."""

from __future__ import annotations

from collections.abc import Callable

from .chunks import Chunk, Content, Hello, Reset, StreamEnd, UpstreamError
from .constants import MODES
from .vocab import Detokenizer, UnknownToken, Vocabulary


class Renderer:
    """Keeps a detokeniser per stream and mode, so a character split across chunks is still whole."""

    def __init__(self, vocabulary_for: Callable[[str], Vocabulary], default: Vocabulary) -> None:
        self._vocabulary_for = vocabulary_for
        self._default = default
        self._vocabulary: dict[int, Vocabulary] = {}
        self._text: dict[tuple[int, int], Detokenizer] = {}

    def line(self, chunk: Chunk) -> str:
        if isinstance(chunk, Hello):
            self._vocabulary[chunk.stream] = self._vocabulary_for(chunk.vocabulary)
            return f"[{chunk.stream}] hello: vocabulary {chunk.vocabulary}"
        if isinstance(chunk, Content):
            key = (chunk.stream, int(chunk.mode))
            detok = self._text.get(key)
            if detok is None:
                detok = self._text[key] = Detokenizer(self._vocabulary.get(chunk.stream, self._default))
            try:
                text = detok.feed(chunk.tokens)
            except UnknownToken as exc:
                text = f"<{exc}>"
            mark = "" if chunk.boundary else " (flush)"
            return f"[{chunk.stream}] {MODES[chunk.mode]}{mark}: {text!r}"
        if isinstance(chunk, StreamEnd):
            self._text = {k: v for k, v in self._text.items() if k[0] != chunk.stream}
            return f"[{chunk.stream}] end of stream"
        if isinstance(chunk, UpstreamError):
            return f"[{chunk.stream}] upstream error: {chunk.error}"
        assert isinstance(chunk, Reset)
        where = "-" if chunk.stream is None else str(chunk.stream)
        counts = f"dropped {chunk.dropped} tokens" + (
            f", skipped {chunk.skipped_bytes} bytes" if chunk.skipped_bytes else ""
        )
        detail = f": {chunk.detail}" if chunk.detail else ""
        return f"[{where}] RESET {chunk.reason} ({counts}){detail}"
