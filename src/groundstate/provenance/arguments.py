"""A call's arguments as a policy sees them: every leaf a typed value under its dotted key, or the call refused.

What the rules judge is exactly what is forwarded or run: a string longer than ``MAX_VALUE_CHARS``, more than
``MAX_ARGUMENT_FACTS`` values or nesting deeper than ``MAX_ARGUMENT_DEPTH`` is refused, never cut. The MCP guard and
the runtime flatten alike, so a rule on ``Key`` means the same in both.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InputError
from ..logic import Float, Name

MAX_ARGUMENT_FACTS = 256  # flattened argument values reported per call; beyond, the call is refused
MAX_VALUE_CHARS = 1_000_000  # characters of one string argument (the engine's bound on a string); longer: refused
MAX_ARGUMENT_DEPTH = 32  # nesting of the arguments; deeper is refused


class ArgumentsRefused(InputError, ValueError):
    """A call's arguments the policy cannot judge as they would be forwarded; the call is refused, never cut."""


class ArgumentsTooLarge(ArgumentsRefused):
    """A call's arguments flatten to more facts than the guard reports, nest too deep, or hold too long a string."""


class ArgumentKeysCollide(ArgumentsRefused):
    """Two of a call's values flatten to the same dotted key (``{"": {"to": …}}`` beside ``{"to": …}``, or
    ``{"a.b": …}`` beside ``{"a": {"b": …}}``): a fact about one would be read as a fact about the other — found by
    an attack, where the user's address under one hid the attacker's under the other — so the call is refused."""


class NotJsonNumber(ArgumentsRefused):
    """An argument is NaN or an infinity: JSON has no such number, so what would be forwarded (``null``) is not what
    a rule would judge."""


def flatten(arguments: dict[str, Any]) -> list[tuple[str, Any]]:
    """(key, typed value) for every leaf: strings, integers, floats, /true, /false, /null — iteratively, so depth
    costs no stack. What the rules see is exactly what is forwarded: a string longer than MAX_VALUE_CHARS, more
    than MAX_ARGUMENT_FACTS values or nesting deeper than MAX_ARGUMENT_DEPTH is refused (ArgumentsTooLarge), never
    cut — a cut value would be judged while the whole one went upstream — and two values under one dotted key are
    refused (ArgumentKeysCollide)."""
    leaves: list[tuple[str, Any]] = []
    keys: set[str] = set()
    pending: list[tuple[str, Any, int]] = [("", arguments, 0)]
    while pending:
        key, value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            if depth >= MAX_ARGUMENT_DEPTH:
                raise ArgumentsTooLarge(f"the arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels (at {key!r})")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            inner = [(f"{key}.{name}" if key else str(name), item, depth + 1) for name, item in items]
            pending.extend(reversed(inner))  # popped in the arguments' own order
            continue
        if key in keys:
            raise ArgumentKeysCollide(f"two of the arguments' values have the key {key!r} once their names are "
                                      "joined with dots: the call is refused (rename them)")  # fmt: skip
        keys.add(key)
        leaves.append((key, _leaf(key, value)))
        if len(leaves) > MAX_ARGUMENT_FACTS:
            raise ArgumentsTooLarge(f"the arguments have more than {MAX_ARGUMENT_FACTS} values")
    return leaves


def _leaf(key: str, value: Any) -> Any:
    """One value as the rules see it (a JSON scalar typed for the logic), or the call refused."""
    if isinstance(value, bool):
        return Name("/true" if value else "/false")
    if value is None:
        return Name("/null")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJsonNumber(f"the argument {key!r} is {value!r}, which JSON cannot carry (it would be "
                                "forwarded as null): the call is refused")  # fmt: skip
        return Float(value)
    text = str(value)
    if len(text) > MAX_VALUE_CHARS:
        raise ArgumentsTooLarge(f"the argument {key!r} has {len(text)} characters; the policy judges at most "
                                f"{MAX_VALUE_CHARS} (the call is refused, not cut)")  # fmt: skip
    return text
