from __future__ import annotations

import json
import tempfile
from typing import Any

import pytest

from groundstate.kernel import Kernel
from groundstate.packets import UpdateValidator


@pytest.fixture(scope="session")
def validator() -> UpdateValidator:
    """The kernel's shipped schemas with the default (model_writable) allowlist."""
    with tempfile.TemporaryDirectory() as empty:
        return Kernel(empty).update_validator()


def envelope(updates: list[Any] | None = None, surface: str = "Done.", **extra: Any) -> dict[str, Any]:
    packet = {
        "intent_classification": {"category": "/query", "verb": "/explain", "target": "a.py", "confidence": 0.9},
        "mangle_updates": updates if updates is not None else ["task_status(/t1, /in_progress)"],
        "memory_operations": [],
        **extra,
    }
    return {"control_packet": packet, "surface_response": surface}


def text(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)
