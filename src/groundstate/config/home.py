"""Where groundstate keeps its state: ``$GROUNDSTATE_HOME`` (default ``~/.groundstate``): the run store, the runs'
workspaces and recordings, the console token, the learned rules."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The state directory, private to its owner (0700): it holds the database, recordings and the console token."""
    path = Path(os.environ.get("GROUNDSTATE_HOME") or Path.home() / ".groundstate").expanduser()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def default_db_url(base: Path | None = None) -> str:
    """The SQLite store in ``base`` (``$GROUNDSTATE_HOME`` by default)."""
    return f"sqlite:///{(base or home()) / 'groundstate.db'}"
