"""The dotted keys of a configuration schema, for the checks that every key is tested and documented."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel


def leaves(model: type[BaseModel], prefix: str = "") -> list[str]:
    """The dotted keys of ``model``: nested models are walked; a table of models (``shard_profiles``) by its
    values' keys."""
    keys = []
    for name, field in model.model_fields.items():
        annotation: Any = field.annotation
        inner = [a for a in (annotation, *get_args(annotation)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if inner:
            keys += leaves(inner[-1], f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys
