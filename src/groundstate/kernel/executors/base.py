"""What every virtual-store executor receives and returns."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import ExecutorError
from ...sandbox import Sandbox, default_sandbox
from ..workspace import Workspace


@dataclass(frozen=True)
class Action:
    """One permitted action as an executor receives it: its id, type, target and payload."""

    action_id: str
    type: str  # the canonical action type, without the leading "/"
    target: str
    payload: str  # JSON text for structured arguments, otherwise plain text

    def fields(self) -> dict[str, Any]:
        """The payload as a dict: a JSON object, or ``{"text": payload}``."""
        text = self.payload.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ExecutorError(f"the payload is not valid JSON: {exc}") from None
            if isinstance(value, dict):
                return value
        return {"text": self.payload} if self.payload else {}

    def text_field(self, name: str, *, required: bool = True) -> str:
        """A named text field of the payload ("" if absent and not ``required``); ExecutorError naming the field
        if it is missing or not text."""
        value = self.fields().get(name)
        if value is None and not required:
            return ""
        if not isinstance(value, str):
            raise ExecutorError(f"{self.type} needs a string {name!r} in its payload")
        return value


@dataclass
class Context:
    """What an executor works with: the workspace, the limits of the shard it runs for, and the sandbox."""

    workspace: Workspace
    timeout_s: float = 60.0
    memory_mb: int = 512
    total_memory_mb: int | None = None  # all processes of one program together (core_limits.max_total_memory_mb)
    max_output_chars: int = 65_536
    test_command: tuple[str, ...] = ("python", "-m", "pytest", "-q")
    build_command: tuple[str, ...] = ("python", "-m", "compileall", "-q", ".")
    search: Any = None  # a web_search backend (SearchBackend); None: the offline corpus
    isolation: Sandbox | None = None  # None: the default sandbox, chosen (or refused) when a program first runs

    def sandbox(self) -> Sandbox:
        """The sandbox programs run in; raises SandboxUnavailable (naming what to install) if there is none."""
        if self.isolation is None:
            self.isolation = default_sandbox()
        return self.isolation

    def bounded(self, text: str) -> str:
        """Outputs are bounded: a model must not be able to flood the kernel or the console."""
        if len(text) <= self.max_output_chars:
            return text
        return text[: self.max_output_chars] + f"\n[output cut at {self.max_output_chars} of {len(text)} characters]"


@dataclass
class Outcome:
    """What an executor reports: success, its (bounded) output, and facts for the kernel to assert."""

    ok: bool
    output: str
    facts: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)  # extra facts for the kernel
    replayed: bool = False  # the tool journal's recorded result of a call that already ran; nothing ran now


Executor = Callable[[Action, Context], Outcome]
