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

from fastapi import HTTPException, Request

from ..guard import ApprovalRefused, Entry, Ledger
from ..runtime import (
    DECISIONS,
    RUNNING,
    DecisionError,
    Executor,
    InProcessExecutor,
    PinnedPolicy,
    RunState,
    Runtime,
    StoreError,
    WorkflowError,
)
from ..store import AccountRefused, Operator, Operators

T = TypeVar("T")
EXAMPLES = Path(str(resources.files("groundstate.runtime") / "examples"))


class Operations:
    """The runtime as the console uses it; refusals become HTTP errors that say what was wrong."""

    def __init__(self, runtime: Runtime, operators: Operators, executor: Executor | None = None) -> None:
        self.runtime = runtime
        self.executor = executor or InProcessExecutor(runtime)  # where the runs it starts or unpauses are driven
        self.operators = operators
        self.drives: dict[str, asyncio.Task[RunState]] = {}
        # the MCP guard's decisions and held calls, in the same database and chain
        self.ledger = Ledger(runtime.store.url, runtime.store.audit_key)

    def decide_call(self, entry_id: int, decision: str, operator: Operator, digest: str | None) -> Entry:
        """An operator's decision on a call the MCP guard holds; 409 with the reason when it cannot apply."""
        if decision not in ("approve", "deny"):
            raise HTTPException(422, f"unknown decision {decision!r}: use approve or deny")
        try:
            return self.ledger.decide(entry_id, decision == "approve", operator.name, digest,
                                      self.runtime.settings.access.self_approval)  # fmt: skip
        except ApprovalRefused as exc:
            raise HTTPException(409, str(exc)) from None

    def accounts(self, change: Callable[[Operators], T]) -> T:
        """A change to the operator accounts; a refused one is a 409 saying why."""
        try:
            return change(self.operators)
        except AccountRefused as exc:
            raise HTTPException(409, str(exc)) from None

    def state(self, run_id: str) -> RunState:
        """The run's state, or 404 naming what could not be read."""
        try:
            return self.runtime.store.state(run_id)
        except StoreError as exc:
            raise HTTPException(404, str(exc)) from None

    def create(self, workflow: str | None, example: str | None, model: str | None, operator: Operator) -> str:
        """Start a run of ``workflow`` (YAML text) or of a bundled example on ``model`` (None: the configuration's
        ``models.default``, else local); 404/422 say why not."""
        text = workflow
        if example is not None:
            path = EXAMPLES / f"{example}.yaml"
            if "/" in example or not path.exists():
                raise HTTPException(404, f"there is no bundled example {example!r}")
            text = path.read_text(encoding="utf-8")
        if not text:
            raise HTTPException(422, "give a workflow (YAML text) or the name of a bundled example")
        try:
            run_id = self.runtime.create(text, "console", model, actor=operator.actor, model_is_operators=False)
        except (WorkflowError, ValueError) as exc:
            raise HTTPException(422, str(exc)) from None
        self.drive(run_id)
        return run_id

    def decide(self, run_id: str, pause: int, decision: str, instructions: str | None, operator: Operator) -> RunState:
        """The operator's decision on the run's open pause ``pause``; 409 saying why when it is no longer open. The
        run goes on in this process if it runs again."""
        if decision not in DECISIONS:
            raise HTTPException(422, f"decision must be one of {', '.join(DECISIONS)}")
        self.state(run_id)
        try:
            state = self.runtime.decide(run_id, decision, instructions or None, actor=operator.actor, pause=pause)
        except DecisionError as exc:
            raise HTTPException(409, str(exc)) from None
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
        try:
            return PinnedPolicy.from_json(state.policy, state.run_id)
        except StoreError as exc:
            raise HTTPException(409, str(exc)) from None

    @staticmethod
    def examples() -> list[Path]:
        """The bundled example workflows, by name."""
        return sorted(EXAMPLES.glob("*.yaml"))


def operations(request: Request) -> Operations:
    """The app's operations (a FastAPI dependency)."""
    found: Operations = request.app.state.operations
    return found
