"""Where groundstate keeps its state: ``$GROUNDSTATE_HOME`` (default ``~/.groundstate``): the run store, the runs'
workspaces and recordings, the console token, the learned rules."""

from __future__ import annotations

import os
import secrets
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


TOKEN_FILE = "console.token"


def load_or_create_token(base: Path) -> tuple[str, bool]:
    """(token, created): the console's token in the state directory ``base``, shared by everything that serves (the
    console, the gateway's metrics, the MCP guard over HTTP); a new token is written with mode 0600 before anything
    can read it."""
    path = base / TOKEN_FILE
    if path.exists():
        return path.read_text(encoding="utf-8").strip(), False
    token = secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token, True
