"""The effective configuration: every key with its value and where the value came from (a file line or the
default), as ``groundstate config show`` prints it."""

from __future__ import annotations

import json
from typing import Any

from .project import LoadedConfig


def effective(loaded: LoadedConfig) -> list[tuple[str, Any, str]]:
    """(dotted key, value, origin) for every leaf of the configuration, in schema order."""
    rows: list[tuple[str, Any, str]] = []
    _walk(loaded.config.model_dump(mode="json"), (), loaded, rows)
    return rows


def render(loaded: LoadedConfig) -> str:
    """The effective configuration as TOML-like lines, each with its origin as a comment."""
    source = str(loaded.path) if loaded.path else "no configuration file: every value is the default"
    lines = [f"# {source}"]
    lines += [f"{key} = {json.dumps(value)}  # {origin}" for key, value, origin in effective(loaded)]
    return "\n".join(lines)


def _walk(value: Any, key: tuple[str, ...], loaded: LoadedConfig, rows: list[tuple[str, Any, str]]) -> None:
    if isinstance(value, dict) and value:
        for name, inner in value.items():
            _walk(inner, (*key, name), loaded, rows)
        return
    rows.append((".".join(key), value, loaded.origin(key)))
