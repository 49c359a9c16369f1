"""``web_search`` over a real search API: a SearXNG instance's JSON API (``GET /search?q=...&format=json``) or any
service answering in that shape.

What an attacker controls: the search service and every page it indexes — so the answer's size is capped while it is
read, its JSON is parsed strictly, each title and snippet is cut, and anything that is not the expected shape is a
``SearchError`` naming what was wrong (never a traceback, never a partial answer passed off as results). A service
that does not answer in ``timeout`` seconds is a ``SearchError`` too.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from ...errors import ExecutorError
from .web import SearchHit

MAX_RESPONSE_BYTES = 2_000_000
MAX_TITLE, MAX_SNIPPET, MAX_SOURCE = 200, 300, 500


class SearchError(ExecutorError):
    """The search service failed: unreachable, too slow, an HTTP error, or an answer that is not search results."""


class HTTPSearch:
    """A SearXNG-style JSON search API at ``url`` (its base, e.g. ``http://127.0.0.1:8888``)."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url, self.timeout = url.rstrip("/"), timeout
        self.headers = {"Accept": "application/json"}

    def search(self, query: str, limit: int) -> list[SearchHit]:
        """The service's first ``limit`` results for ``query``, in its order."""
        body = self._fetch(query)
        try:
            document = json.loads(body)
        except ValueError:
            raise SearchError(f"the search service at {self.url} did not answer with JSON") from None
        results = document.get("results") if isinstance(document, dict) else None
        if not isinstance(results, list):
            raise SearchError(f"the search service at {self.url} answered without a 'results' list")
        return [_hit(item, rank) for rank, item in enumerate(results[:limit], start=1)]

    def _fetch(self, query: str) -> bytes:
        params = {"q": query, "format": "json"}
        try:
            with httpx.stream("GET", f"{self.url}/search", params=params, headers=self.headers,
                              timeout=self.timeout) as response:  # fmt: skip
                if response.status_code != 200:
                    raise SearchError(f"the search service at {self.url} answered HTTP {response.status_code}")
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise SearchError(f"the search service at {self.url} sent more than {MAX_RESPONSE_BYTES} "
                                          "bytes")  # fmt: skip
                    chunks.append(chunk)
                return b"".join(chunks)
        except httpx.TimeoutException:
            raise SearchError(f"the search service at {self.url} did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise SearchError(f"the search service at {self.url} cannot be reached: {type(exc).__name__}") from None


def _hit(item: Any, rank: int) -> SearchHit:
    if not isinstance(item, dict):
        raise SearchError(f"search result {rank} is not an object")
    title, source, snippet = item.get("title"), item.get("url"), item.get("content", "")
    if not isinstance(title, str) or not isinstance(source, str) or not isinstance(snippet, str):
        raise SearchError(f"search result {rank} lacks a text 'title' and 'url' (and 'content', if any)")
    score = item.get("score")
    value = float(score) if isinstance(score, int | float) and not isinstance(score, bool) else 0.0
    return SearchHit(_line(title, MAX_TITLE), _line(source, MAX_SOURCE), _line(snippet, MAX_SNIPPET), value)


def _line(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (a result cannot add lines of its own to the tool output)."""
    return " ".join(text.split())[:limit]
