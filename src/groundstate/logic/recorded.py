"""The facts a decision was made from, as the MCP guard's ledger and a run's recorded guard reports keep them: JSON,
each value with its type (a name, a float, a string, an integer), so that ``groundstate policy replay`` re-decides
from exactly what the policy saw — under another policy — without the upstream servers, the session, the model or
the journal."""

from __future__ import annotations

import json
from typing import Any

from .. import safejson
from ..errors import InputError
from .values import Float, Name

Fact = tuple[str, tuple[Any, ...]]


class RecordedFactsError(InputError, ValueError):
    """Recorded facts that cannot be read (written by hand, or by another program)."""


def encode_facts(facts: list[Fact]) -> str:
    """``facts`` as the ledger's ``facts`` column keeps them."""
    return json.dumps(facts_json(facts), ensure_ascii=False, separators=(",", ":"))


def decode_facts(text: str) -> list[Fact]:
    """The facts ``encode_facts`` wrote; RecordedFactsError on anything else."""
    try:
        return facts_of_json(safejson.loads(text))  # bounded: a row nested past its depth is refused, not recursed
    except ValueError as exc:
        raise RecordedFactsError(f"the recorded facts cannot be read ({exc})") from None


def facts_json(facts: list[Fact]) -> list[Any]:
    """``facts`` as JSON values (inside a larger record)."""
    return [[predicate, [_value(v) for v in row]] for predicate, row in facts]


def facts_of_json(rows: Any) -> list[Fact]:
    """The facts ``facts_json`` gave; RecordedFactsError on anything else."""
    try:
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
