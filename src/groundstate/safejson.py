"""JSON from untrusted sources with a nesting bound, checked before the recursive parser runs.

``json.loads`` recurses once per nesting level, so ``[[[[…`` a few thousand deep raises ``RecursionError`` (or
exhausts the C stack in other parsers). Every parser of provider, model or store bytes goes through ``loads``
here instead: the depth is measured by one linear regex scan that skips strings, and anything too deep is a
``JSONDepthError`` with the depth found — a typed, bounded outcome the caller reports like any malformed JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from .errors import InputError, LimitError

MAX_DEPTH = 64
# possessive (``++``, ``*+``): a string is consumed without backtracking points, so a long one — an unterminated
# ``"[[[[…`` of 50 MB from an upstream — costs no memory; with ``(?:[^"\\]|\\.)*`` it cost ~120 bytes a character
_TOKENS = re.compile(r'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]', re.DOTALL)


class JSONDepthError(LimitError, ValueError):
    """JSON nested deeper than the bound; a ValueError too, so callers treating it as malformed JSON keep working."""


class NonFiniteNumber(InputError, ValueError):
    """``NaN`` or ``Infinity`` in JSON: not JSON, and no number a policy could reason about."""


def depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (strings skipped; unbalanced text is measured too)."""
    level = deepest = 0
    for match in _TOKENS.finditer(text):
        char = match.group()[0]
        if char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest


def flattened(text: str, keep: int = 1) -> str:
    """``text`` with every array or object nested deeper than ``keep`` levels replaced by ``null``, in one linear
    scan: what is left can be parsed safely to read the outer fields of a message too deep to parse whole (a
    JSON-RPC request's ``id`` and ``method``, to answer it)."""
    out: list[str] = []
    level, position, cut_from = 0, 0, -1
    for match in _TOKENS.finditer(text):
        char = match.group()[0]
        if char == '"':
            continue
        if char in "[{":
            level += 1
            if level == keep + 1:
                out.append(text[position:match.start()])
                cut_from = match.start()
        elif char in "]}":
            if level == keep + 1 and cut_from >= 0:
                out.append("null")
                position, cut_from = match.end(), -1
            level -= 1
    out.append(text[position:] if cut_from < 0 else "null")
    return "".join(out)


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH, strict: bool = True) -> Any:
    """``json.loads`` refusing nesting deeper than ``max_depth`` and non-finite numbers (``NaN``, ``Infinity``, and a
    number that overflows to infinity, ``1e400``)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")
    # every level opens with a bracket, so text with no more brackets than the bound cannot be too deep: the scan
    # (a regex match per string and bracket) runs only where the count, done at C speed, leaves room for doubt
    if text.count("[") + text.count("{") > max_depth and (found := depth(text)) > max_depth:
        raise JSONDepthError(f"JSON nested {found} levels deep; at most {max_depth} are accepted")
    return (_STRICT if strict else _LENIENT).decode(text)


def _refuse_constant(name: str) -> Any:
    raise NonFiniteNumber(f"{name} is not JSON (only finite numbers are)")


def _finite(text: str) -> float:
    """A JSON number with a fraction or an exponent, refused when it overflows to infinity (``1e400``)."""
    value = float(text)
    if math.isinf(value):
        raise NonFiniteNumber(f"{text[:40]} overflows a float (only finite numbers are JSON)")
    return value


_STRICT = json.JSONDecoder(strict=True, parse_constant=_refuse_constant, parse_float=_finite)  # built once:
_LENIENT = json.JSONDecoder(strict=False, parse_constant=_refuse_constant, parse_float=_finite)  # json.loads makes one
# per call


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def leaves(value: Any) -> Iterator[Any]:
    """Every scalar of a parsed JSON value, object keys included — without recursion, whatever its depth."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        else:
            yield item


def unwritable(item: Any) -> bool:
    """Whether ``item`` is a string no UTF-8 can carry (it holds a lone surrogate, which JSON may escape)."""
    if not isinstance(item, str):
        return False
    try:
        item.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str parsed from JSON, any surrogate is half a pair


def whole_characters(text: str) -> str:
    """``text`` with each lone surrogate (half a character, which JSON's ``\\ud800`` escape makes) replaced by
    U+FFFD: UTF-8 cannot write half a character, so whatever stores or shows it would fail on it."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def lone_surrogates(text: str, value: Any) -> bool:
    """Whether ``value`` (parsed from ``text``) holds a string with a lone surrogate (``"\\ud800"``): JSON allows the
    escape, UTF-8 cannot write the character, so it breaks whatever writes it on. Only text holding such an escape is
    walked."""
    return _SURROGATE_ESCAPE.search(text) is not None and any(unwritable(item) for item in leaves(value))


def dumps_line(value: Any, *, compact: bool = False) -> str:
    """One line of strict JSON for JSONL output: UTF-8 where it can be, ``\\u`` escapes where a lone surrogate
    (data from a hostile stream) cannot be written as UTF-8; non-finite numbers refused (``ValueError``).
    ``compact``: no space after separators (a wire message)."""
    separators = (",", ":") if compact else None
    line = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=separators)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, allow_nan=False, separators=separators)
    return line


def finite(value: float, cap: float) -> float:
    """A number made safe to print as JSON: NaN becomes the cap, and anything above the cap is the cap."""
    if math.isnan(value) or value > cap:
        return cap
    return value
