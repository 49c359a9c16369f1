"""Fixtures every test package may ask for by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from .postgres import postgres  # noqa: F401 (the PostgreSQL fixture, for store_url)

# The README's test command runs two tests at a time: how long one example of a property test takes then says how busy
# the machine is, not how fast the code is, so examples have no deadline. The tests that judge time are marked
# `alone`, run after the rest by themselves, and state their own bounds.
settings.register_profile("groundstate", deadline=None)
settings.load_profile("groundstate")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store's URL on each database groundstate supports: a SQLite file, and a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'gs.db'}"
    return str(request.getfixturevalue("postgres"))
