"""Where a run's segments are driven: in this process (asyncio, the default) or by drivers on a Ray cluster.

A *segment* is one drive of a run: until it completes, fails, is aborted or waits for an operator. Every entry point
that drives runs (``run``, ``runs resume``, ``serve``, ``demo``) hands segments to an executor; the runtime's lease
keeps one driver per run wherever segments run, and everything a segment needs is in the store and the runs
directory, so any driver can take the next one.
"""

from __future__ import annotations

from typing import Protocol

from ..errors import ConfigurationError
from .runner import Runtime
from .state import RunState

LOCAL = "local"


class RunExecutorError(ConfigurationError):
    """The executor cannot be used: an unknown address, Ray not installed, a cluster without segment drivers."""


class Executor(Protocol):
    """Drives segments of runs somewhere; ``drive`` returns the run's state once the segment is over."""

    description: str  # for start-up lines and ``status``: where segments run
    remote: bool  # segments run in other processes: this one sees their progress only in the store

    async def drive(self, run_id: str, *, resume_failed: bool = False) -> RunState:
        """Drive one segment of the run (``resume_failed``: continue a failed run); its state after it."""
        ...

    def close(self) -> None:
        """Release what the executor holds (its drivers); runs it was driving are taken over by the next one."""
        ...


class InProcessExecutor:
    """Today's asyncio driving, on the caller's event loop (the single-machine default)."""

    description = "in this process"
    remote = False

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def drive(self, run_id: str, *, resume_failed: bool = False) -> RunState:
        """Drive one segment here."""
        return await self.runtime.drive(run_id, resume_failed=resume_failed)

    def close(self) -> None:
        """Nothing to release."""


def open_executor(runtime: Runtime, address: str | None = None) -> Executor:
    """The executor ``address`` names (``--executor``), else the configuration's ``[executor] address``:
    ``local`` or ``ray://HOST:PORT``; RunExecutorError saying why one cannot be used."""
    head = ray_head(address or runtime.settings.executor.address)
    if head is None:
        return InProcessExecutor(runtime)
    from .ray_executor import RayExecutor

    return RayExecutor(runtime, head)


def ray_head(address: str) -> str | None:
    """The Ray head's ``HOST:PORT`` an executor address names (None: ``local``); RunExecutorError for anything else."""
    if address == LOCAL:
        return None
    if address.startswith("ray://"):
        return address.removeprefix("ray://")
    raise RunExecutorError(f"executor {address!r}: use 'local' or 'ray://HOST:PORT' (the Ray head's GCS address)")
