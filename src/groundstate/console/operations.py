"""What the console does to runs, shared by the API and the pages: find, create, decide and drive.

The console hands the runs it starts or unpauses to its executor (one task per run on the server's loop: in this
process, or waiting on a driver of a Ray cluster); the runtime's lease keeps a second driver elsewhere from writing
to the same run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TypeVar

from fastapi import Request

from ..errors import GroundstateError
from ..guard import Entry, Ledger
from ..runtime import (
    DECISIONS,
    RUNNING,
    Executor,
    InProcessExecutor,
    PinnedPolicy,
    RunState,
    Runtime,
    WorkflowError,
)
from ..store import Operator, Operators
from .problems import BadRequest, UnknownExample

T = TypeVar("T")
EXAMPLES = Path(str(resources.files("groundstate.runtime") / "examples"))


class Operations:
    """The runtime as the console uses it; its refusals are ``GroundstateError``s, answered by ``problems``."""

    def __init__(self, runtime: Runtime, operators: Operators, executor: Executor | None = None) -> None:
        self.runtime = runtime
        self.executor = executor or InProcessExecutor(runtime)  # where the runs it starts or unpauses are driven
        self.operators = operators
        self.drives: dict[str, asyncio.Task[RunState]] = {}
        # the MCP guard's decisions and held calls, in the same database and chain
        self.ledger = Ledger(runtime.store.url, runtime.store.audit_key)

    def decide_call(self, entry_id: int, decision: str, operator: Operator, digest: str | None) -> Entry:
        """An operator's decision on a call the MCP guard holds; ``ApprovalRefused`` (409) with the reason when it
        cannot apply."""
        if decision not in ("approve", "deny"):
            raise BadRequest(f"unknown decision {decision!r}: use approve or deny")
        return self.ledger.decide(entry_id, decision == "approve", operator.name, digest,
                                  self.runtime.settings.access.self_approval)  # fmt: skip

    def accounts(self, change: Callable[[Operators], T]) -> T:
        """A change to the operator accounts; a refused one is an ``AccountRefused`` saying why (409 when the
        accounts as they are refuse it, 404 for an unknown name, 400 for a bad name or role)."""
        return change(self.operators)

    def state(self, run_id: str) -> RunState:
        """The run's state; ``UnknownRun`` (404) naming it, or the store's error naming what could not be read."""
        return self.runtime.store.state(run_id)

    def create(self, workflow: str | None, example: str | None, model: str | None, operator: Operator) -> str:
        """Start a run of ``workflow`` (YAML text) or of a bundled example on ``model`` (None: the configuration's
        ``models.default``, else local); 404/422 say why not."""
        text = workflow
        if example is not None:
            path = EXAMPLES / f"{example}.yaml"
            if "/" in example or not path.exists():
                raise UnknownExample(f"there is no bundled example {example!r}")
            text = path.read_text(encoding="utf-8")
        if not text:
            raise BadRequest("give a workflow (YAML text) or the name of a bundled example")
        try:
            run_id = self.runtime.create(text, "console", model, actor=operator.actor, model_is_operators=False)
        except ValueError as exc:  # a validation error of the workflow's schema, not one of ours yet
            if isinstance(exc, GroundstateError):
                raise
            raise WorkflowError("the workflow", [str(exc)]) from None
        self.drive(run_id)
        return run_id

    def decide(self, run_id: str, pause: int, decision: str, instructions: str | None, operator: Operator) -> RunState:
        """The operator's decision on the run's open pause ``pause``; 409 saying why when it is no longer open. The
        run goes on in this process if it runs again."""
        if decision not in DECISIONS:
            raise BadRequest(f"decision must be one of {', '.join(DECISIONS)}")
        self.state(run_id)
        state = self.runtime.decide(run_id, decision, instructions or None, actor=operator.actor, pause=pause)
        if state.status == RUNNING:
            self.drive(run_id)
        return state

    def drive(self, run_id: str) -> None:
        """Drive the run's next segment on the executor unless this process already waits on one."""
        task = self.drives.get(run_id)
        if task is None or task.done():
            self.drives[run_id] = asyncio.create_task(self.executor.drive(run_id))

    def pinned_policy(self, state: RunState) -> PinnedPolicy:
        """The policy the run is pinned to (the runtime's current one for runs created before pins)."""
        if state.policy is None:
            return self.runtime.policy
        return PinnedPolicy.from_json(state.policy, state.run_id)

    @staticmethod
    def examples() -> list[Path]:
        """The bundled example workflows, by name."""
        return sorted(EXAMPLES.glob("*.yaml"))


def operations(request: Request) -> Operations:
    """The app's operations (a FastAPI dependency)."""
    found: Operations = request.app.state.operations
    return found
