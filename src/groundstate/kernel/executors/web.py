"""``web_search`` over a pluggable backend; the default is an offline corpus of documents (no network).

A backend is any object with ``search(query, limit) -> list[SearchHit]``. ``CorpusSearch`` ranks the ``.md`` and
``.txt`` files of a directory by BM25 over their words; the package ships a small corpus so a fresh install can
search offline.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol

from ...errors import ExecutorError
from .base import Action, Context, Outcome

_WORD = re.compile(r"[a-z0-9]+")
MAX_RESULTS = 5


@dataclass(frozen=True)
class SearchHit:
    title: str
    source: str
    snippet: str
    score: float


class SearchBackend(Protocol):
    def search(self, query: str, limit: int) -> list[SearchHit]: ...


def default_corpus() -> Path:
    return Path(str(resources.files("groundstate.kernel") / "corpus"))


class CorpusSearch:
    """BM25 over a directory of documents, read once."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_corpus()
        self.documents: list[tuple[str, str, Counter[str], int]] = []  # (title, source, term counts, length)
        self._texts: dict[str, str] = {}
        for path in sorted([*self.directory.glob("**/*.md"), *self.directory.glob("**/*.txt")]):
            if path.name == "README.md":
                continue  # the corpus's own description
            text = path.read_text(encoding="utf-8", errors="replace")
            words = _WORD.findall(text.lower())
            title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.strip()), path.stem)
            self.documents.append((title, path.name, Counter(words), len(words)))
            self._texts[path.name] = text
        self._average = sum(d[3] for d in self.documents) / max(len(self.documents), 1)

    def search(self, query: str, limit: int = MAX_RESULTS) -> list[SearchHit]:
        """The ``limit`` best documents for ``query`` by BM25, best first (ties by file name)."""
        terms = set(_WORD.findall(query.lower()))
        hits = []
        for title, source, counts, length in self.documents:
            score = 0.0
            for term in terms:
                frequency = counts.get(term, 0)
                if not frequency:
                    continue
                having = sum(1 for d in self.documents if term in d[2])
                idf = math.log(1 + (len(self.documents) - having + 0.5) / (having + 0.5))
                score += idf * frequency * 2.2 / (frequency + 1.2 * (0.25 + 0.75 * length / self._average))
            if score > 0:
                hits.append(SearchHit(title, source, self._snippet(source, terms), round(score, 4)))
        return sorted(hits, key=lambda h: (-h.score, h.source))[:limit]

    def _snippet(self, source: str, terms: set[str]) -> str:
        for line in self._texts[source].splitlines():
            if terms & set(_WORD.findall(line.lower())) and not line.startswith("#"):
                return line.strip()[:300]
        return ""


def web_search(action: Action, context: Context) -> Outcome:
    """Target is the query."""
    if not action.target.strip():
        raise ExecutorError("web_search needs a query as its target")
    backend = context.search or CorpusSearch()
    hits = backend.search(action.target, MAX_RESULTS)
    if not hits:
        return Outcome(True, "no results")
    lines = [f"{i}. {h.title} ({h.source}): {h.snippet}" for i, h in enumerate(hits, 1)]
    return Outcome(True, context.bounded("\n".join(lines)))
