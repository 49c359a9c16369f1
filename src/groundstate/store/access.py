"""What each role may do, as ``access.mg`` derives it (``role_may/2``); Python looks the answer up and obeys. And
who may decide what: ``decision_refused/2`` (separation of duties) from the facts of one decision.

The role rules are evaluated once per process: they have no facts from outside, so their answer cannot change while
it runs.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cache
from importlib import resources

from ..logic import Engine, Name, Program

SEE, ACT, ADMINISTER = "see", "act", "administer"


@cache
def _program() -> Program:
    source = (resources.files("groundstate.store") / "defaults" / "access.mg").read_text(encoding="utf-8")
    return Program.parse(source, source="access.mg")


@cache
def _table() -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    engine = Engine(_program())
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


def decision_refused(account: str, asked_by: str | None, self_approval: Collection[str] = ()) -> str | None:
    """Why ``account`` may not decide a held call or a pause that ``asked_by`` (an account's name, or None when no
    account asked: a stdio client, a run started by the runtime) asked for — or None when it may. ``access.mg``
    decides from these facts; ``self_approval`` is the configuration's ``[access] self_approval``."""
    engine = Engine(_program())
    engine.assert_facts("deciding", [(account,)])
    if asked_by is not None:
        engine.assert_facts("asked_by", [(asked_by,)])
    engine.assert_facts("self_approval", [(name,) for name in self_approval])
    engine.evaluate()
    reasons = [str(row[1]) for row in engine.facts("decision_refused")]
    return reasons[0] if reasons else None
