from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from groundstate.kernel import ActionReport, Kernel, Shards, VirtualStore
from groundstate.packets import parse_output

from ..runtime.conftest import model  # noqa: F401 - the scripted provider fixture (web_search in runs)


class Turns:
    """A kernel on a temporary git workspace, driven by control packets as a model would send them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kernel = Kernel(root)
        store = VirtualStore(
            self.kernel.workspace, test_command=("python", "-m", "pytest", "-q", "-p", "no:cacheprovider")
        )
        self.shards = Shards(self.kernel, store)

    def turn(
        self,
        verb: str = "/explain",
        target: str = "codebase",
        *,
        updates: Sequence[str] = (),
        confidence: float = 0.9,
        category: str = "/query",
        **extra: Any,
    ) -> list[ActionReport]:
        packet = {"intent_classification": {"category": category, "verb": verb, "target": target,
                                            "confidence": confidence},
                  "mangle_updates": list(updates), "memory_operations": [], **extra}  # fmt: skip
        result = parse_output(json.dumps({"control_packet": packet, "surface_response": "ok"}),
                              self.kernel.update_validator())  # fmt: skip
        assert result.ok and not result.dropped_updates, result.to_json()
        return self.shards.step(result)

    def request(self, action: str, target: str, payload: str | dict[str, Any] = "") -> ActionReport:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        tool = {"tool": action, "argument": target, "content": text}
        [report] = self.turn("/do", "codebase", category="/instruction", tool_requests=[tool])
        return report


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)  # fmt: skip


@pytest.fixture
def turns(tmp_path: Path) -> Iterator[Turns]:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("def answer():\n    return 42\n", encoding="utf-8")
    (root / "test_app.py").write_text("from app import answer\n\ndef test_answer():\n    assert answer() == 42\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    yield Turns(root)
