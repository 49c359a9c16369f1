"""Mangle values as JSON: numbers and strings stay themselves, every other type is tagged."""

from __future__ import annotations

import base64
from typing import Any

from .values import Float, List, Map, Name, Pair, Struct, format_float


def to_json(value: Any) -> Any:
    kind = type(value)
    if kind is int or kind is str:
        return value
    if kind is Float:
        return float(value) if format_float(value)[0] != "f" else {"float": format_float(value)}
    if kind is Name:
        return {"name": value.text}
    if kind is bytes:
        return {"bytes": base64.b64encode(value).decode("ascii")}
    if kind is List:
        return [to_json(v) for v in value]
    if kind is Pair:
        return {"pair": [to_json(value[0]), to_json(value[1])]}
    if kind is Map:
        return {"map": [[to_json(k), to_json(v)] for k, v in value.entries]}
    if kind is Struct:
        return {"struct": {k.text: to_json(v) for k, v in value.entries}}
    raise TypeError(f"not a Mangle value: {value!r}")
