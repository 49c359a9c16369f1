"""Where groundstate keeps its state: ``$GROUNDSTATE_HOME`` (default ``~/.groundstate``)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    path = Path(os.environ.get("GROUNDSTATE_HOME") or Path.home() / ".groundstate").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_db_url(base: Path | None = None) -> str:
    return f"sqlite:///{(base or home()) / 'groundstate.db'}"
