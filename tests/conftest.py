"""Fixtures every test package may ask for by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from .postgres import postgres  # noqa: F401 (the PostgreSQL fixture, for store_url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store's URL on each database groundstate supports: a SQLite file, and a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'gs.db'}"
    return str(request.getfixturevalue("postgres"))
