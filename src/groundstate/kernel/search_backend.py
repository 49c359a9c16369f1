"""The ``web_search`` backend a configuration names: the offline corpus (the shipped one, or a directory of your
own), or a SearXNG-style JSON API."""

from __future__ import annotations

from ..config import SearchConfig
from .executors.http_search import HTTPSearch
from .executors.web import CorpusSearch, SearchBackend


def configured_search(config: SearchConfig) -> SearchBackend:
    """The backend of ``[search]``."""
    if config.backend == "searxng":
        assert config.url is not None  # the configuration refuses searxng without a url
        return HTTPSearch(config.url, config.timeout_sec)
    return CorpusSearch(config.corpus)
