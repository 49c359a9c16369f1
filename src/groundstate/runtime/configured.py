"""A runtime as an entry point builds it: the project configuration found the usual way, its store (``--db`` wins),
and the state directory — so ``run``, ``runs``, ``serve`` and ``demo`` cannot each read a different subset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import tracing
from ..config import load_config
from .home import default_db_url, home
from .runner import Runtime
from .store import EventStore


def configured_runtime(db: str | None, config: Path | None, **options: Any) -> Runtime:
    """The runtime of a command: ``db`` else the configuration's ``store.url`` else SQLite in the state directory;
    ConfigFileError if the configuration is unusable."""
    base = home()
    settings = load_config(config).config
    tracing.configure(settings.tracing.endpoint, settings.tracing.service_name)
    return Runtime(EventStore(db or settings.store.url or default_db_url(base)), base, settings=settings, **options)
