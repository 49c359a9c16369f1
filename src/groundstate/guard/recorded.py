"""The facts a decision was made from, as the ledger keeps them: JSON, each value with its type (a name, a float, a
string, an integer), so that ``groundstate policy replay`` re-decides the call from exactly what the policy saw —
under another policy — without the upstream servers, the session or the journal."""

from __future__ import annotations

import json
from typing import Any

from ..errors import InputError
from ..logic import Float, Name

Fact = tuple[str, tuple[Any, ...]]


class RecordedFactsError(InputError, ValueError):
    """Recorded facts that cannot be read (written by hand, or by another program)."""


def encode(facts: list[Fact]) -> str:
    """``facts`` as the ledger's ``facts`` column keeps them."""
    return json.dumps([[predicate, [_value(v) for v in row]] for predicate, row in facts], ensure_ascii=False,
                      separators=(",", ":"))  # fmt: skip


def decode(text: str) -> list[Fact]:
    """The facts ``encode`` wrote; RecordedFactsError on anything else."""
    try:
        rows = json.loads(text)
        return [(str(predicate), tuple(_typed(v) for v in row)) for predicate, row in rows]
    except (ValueError, TypeError, KeyError) as exc:
        raise RecordedFactsError(f"the recorded facts cannot be read ({exc})") from None


def _value(value: Any) -> Any:
    if isinstance(value, Name):
        return {"n": str(value)}
    if isinstance(value, Float):
        return {"f": float(value)}
    return value


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return Name(value["n"]) if "n" in value else Float(float(value["f"]))
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"not a recorded value: {value!r}")
    return value
