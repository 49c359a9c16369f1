"""The virtual store: carries out routed actions through its executors and never lets one crash the kernel."""

from __future__ import annotations

import logging
from typing import Any

from ..errors import GroundstateError
from ..sandbox import Sandbox
from .config import ShardProfile
from .executors import EXECUTORS, Action, Context, Executor, Outcome
from .workspace import Workspace

log = logging.getLogger(__name__)


class VirtualStore:
    """The executors a kernel may run, by name, each confined to the workspace."""

    def __init__(
        self,
        workspace: Workspace,
        executors: dict[str, Executor] | None = None,
        *,
        max_output_chars: int = 65_536,
        test_command: tuple[str, ...] | None = None,
        build_command: tuple[str, ...] | None = None,
        search: Any = None,
        sandbox: Sandbox | None = None,
        total_memory_mb: int | None = None,
    ) -> None:
        self.workspace = workspace
        self.search = search  # the web_search backend (None: the shipped offline corpus)
        self.sandbox = sandbox  # where programs run (None: the default sandbox, or a refusal if there is none)
        self.executors = dict(EXECUTORS if executors is None else executors)
        self.max_output_chars = max_output_chars
        self.total_memory_mb = total_memory_mb  # the memory of all processes of one program (None: per process only)
        self.commands = {k: v for k, v in (("test_command", test_command), ("build_command", build_command)) if v}

    def names(self) -> set[str]:
        """The executor names, as the policy's routes may name them."""
        return set(self.executors)

    def run(self, executor: str, action: Action, profile: ShardProfile) -> Outcome:
        """Run ``action`` with ``executor`` under the shard profile's limits; the executor's outcome."""
        function = self.executors.get(executor)
        if function is None:
            return Outcome(False, f"the virtual store has no executor {executor}")
        context = Context(
            self.workspace,
            timeout_s=profile.max_execution_time_sec,
            memory_mb=profile.max_memory_mb,
            total_memory_mb=self.total_memory_mb,
            max_output_chars=self.max_output_chars,
            search=self.search,
            isolation=self.sandbox,
            **self.commands,
        )
        try:
            return function(action, context)
        except GroundstateError as exc:  # ExecutorError, WorkspaceError, SandboxError: the recorded failure
            return Outcome(False, str(exc))
        except (OSError, UnicodeError) as exc:
            log.info("executor %s failed on %s: %s", executor, action.action_id, exc)
            return Outcome(False, f"{type(exc).__name__}: {exc}")
