"""What each role may do, as ``access.mg`` derives it (``role_may/2``); Python looks the answer up and obeys.

The rules are evaluated once per process: they have no facts from outside, so their answer cannot change while it
runs.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from ..logic import Engine, Name, Program

SEE, ACT, ADMINISTER = "see", "act", "administer"


@cache
def _table() -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    source = (resources.files("groundstate.store") / "defaults" / "access.mg").read_text(encoding="utf-8")
    engine = Engine(Program.parse(source, source="access.mg"))
    engine.evaluate()
    roles = frozenset(_bare(row[0]) for row in engine.query("role(R)"))
    grants = frozenset((_bare(role), _bare(action)) for role, action in engine.query("role_may(R, A)"))
    return roles, grants


def roles() -> frozenset[str]:
    """The roles an account can have (``viewer``, ``operator``, ``admin``)."""
    return _table()[0]


def may(role: str, action: str) -> bool:
    """Whether ``access.mg`` derives ``role_may(/role, /action)``."""
    return (role, action) in _table()[1]


def _bare(value: object) -> str:
    return (value.text if isinstance(value, Name) else str(value)).removeprefix("/")
