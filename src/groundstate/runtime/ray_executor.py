"""Segments of runs driven by a pool of processes on a Ray cluster (the ``ray`` extra).

Each process of the pool is a Ray actor (a *segment driver*) holding a runtime built from the same configuration and
store as the caller's; it drives many runs at once on its event loop. Actors are placed only on nodes that offer the
``groundstate`` resource (``groundstate worker`` starts such a node: one unit per driver it hosts), spread across
them. When a node is lost, Ray restarts its drivers elsewhere and calls the segments they were driving again; the
new driver waits out the lost one's lease (``Runtime.drive(take_over=True)``) and resumes the run from the store —
completed agents are not run again and a tool call that was in flight becomes a pause (the journal's rule).
Nothing a driver keeps in memory is needed by another: runs, events, leases and the tool journal are in the store
(Postgres for more than one machine), workspaces and recordings in the shared runs directory.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ProjectConfig
from .executors import RunExecutorError
from .runner import Runtime
from .state import RunState
from .store import EventStore
from .workflow import workflow_of

SLOT = "groundstate"  # the Ray resource a node offers per segment driver it may host
NAMESPACE = "groundstate"
DRIVER_PREFIX = "groundstate-driver-"  # segment drivers' actor names (``groundstate status`` finds them by it)


@dataclass(frozen=True)
class Recipe:
    """What a segment driver needs to build the caller's runtime on another node (pickled by Ray)."""

    store_url: str
    home: str
    settings: ProjectConfig
    lease_seconds: float
    concurrency: int

    @classmethod
    def of(cls, runtime: Runtime) -> Recipe:
        """The recipe of ``runtime``: its store, state directory, configuration and driving limits."""
        return cls(runtime.store.url, str(runtime.home), runtime.settings, runtime.lease_seconds, runtime.concurrency)

    def build(self) -> Runtime:
        """The runtime, as the caller has it."""
        return Runtime(EventStore(self.store_url), Path(self.home), settings=self.settings,
                       lease_seconds=self.lease_seconds, concurrency=self.concurrency)  # fmt: skip


class SegmentDriver:
    """One process of the pool (a Ray actor): drives segments of any run it is handed, many at once."""

    def __init__(self, recipe: Recipe) -> None:
        import ray

        self.runtime = recipe.build()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.runtime.node = f"{socket.gethostname()}/{self.node_id[:12]}"  # leases and RunStarted name the node

    async def drive(self, run_id: str, resume_failed: bool) -> str:
        """One segment of the run (waiting out a lost driver's lease first); its status when it is over."""
        state = await self.runtime.drive(run_id, resume_failed=resume_failed, take_over=True)
        return state.status

    def report(self) -> dict[str, Any]:
        """Where this driver runs, the CPU seconds its process has used, and its metrics (Prometheus text), for
        ``groundstate status`` and the scale benchmark."""
        return {"node": self.node_id, "host": socket.gethostname(), "pid": os.getpid(),
                "cpu_seconds": time.process_time(), "metrics": self.runtime.run_metrics.render()}  # fmt: skip


class RayExecutor:
    """Hands each segment to a driver of the pool on the cluster at ``address`` (the head's GCS ``HOST:PORT``)."""

    remote = True

    def __init__(self, runtime: Runtime, address: str) -> None:
        ray = _join(address)
        self.runtime = runtime
        self.address = address
        slots = ray.cluster_resources().get(SLOT, 0)
        settings = runtime.settings.executor
        if slots < 1:
            raise RunExecutorError(f"executor ray://{address}: no node of the cluster offers the {SLOT!r} resource; "
                                f"start one with: groundstate worker --address {address}")  # fmt: skip
        self.description = f"Ray cluster {address} ({settings.processes} segment drivers, {slots:g} slots)"
        self._recipe = Recipe.of(runtime)
        self._tag = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._pools: dict[tuple[tuple[str, float], ...], list[Any]] = {}
        self._pool(())  # the default pool, placed now so a cluster that cannot host it says so at the first run

    async def drive(self, run_id: str, *, resume_failed: bool = False) -> RunState:
        """One segment on a driver of the pool that has what the run's models need (``[executor.resources]``)."""
        state = self.runtime.store.state(run_id)
        pool = self._pool(self._needs(state))
        driver = pool[zlib.crc32(run_id.encode()) % len(pool)]
        await driver.drive.remote(run_id, resume_failed)
        return self.runtime.store.state(run_id)

    def close(self) -> None:
        """Stop this executor's drivers (their runs' leases lapse; a later driver takes them over)."""
        ray = _ray()
        for pool in self._pools.values():
            for driver in pool:
                ray.kill(driver, no_restart=True)
        self._pools.clear()

    def _needs(self, state: RunState) -> tuple[tuple[str, float], ...]:
        """The Ray resources the run's models need, from ``[executor.resources]`` (model-spec prefix -> resources)."""
        table = self.runtime.settings.executor.resources
        if not table:
            return ()
        workflow = workflow_of(state)
        specs = {state.model or "local", *state.models.values(), *state.fallback,
                 *(spec for spec in [workflow.model, *(a.model for a in workflow.agents)] if spec)}  # fmt: skip
        needed: dict[str, float] = {}
        for prefix, resources in table.items():
            if any(spec.startswith(prefix) for spec in specs):
                for name, amount in resources.items():
                    needed[name] = max(needed.get(name, 0.0), amount)
        return tuple(sorted(needed.items()))

    def _pool(self, needs: tuple[tuple[str, float], ...]) -> list[Any]:
        """The drivers for runs that need ``needs`` (created on first use: ``processes`` of them for the default
        pool, one for each set of special resources)."""
        pool = self._pools.get(needs)
        if pool is None:
            ray = _ray()
            actor = ray.remote(SegmentDriver)
            count = self.runtime.settings.executor.processes if not needs else 1
            options = {"namespace": NAMESPACE, "num_cpus": 0, "resources": {SLOT: 1, **dict(needs)},
                       "max_restarts": -1, "max_task_retries": -1, "max_concurrency": 1000,
                       "scheduling_strategy": "SPREAD",
                       "runtime_env": {"env_vars": {"GROUNDSTATE_HOME": self._recipe.home}}}  # fmt: skip
            name = f"{DRIVER_PREFIX}{self._tag}-{len(self._pools)}"
            pool = [actor.options(name=f"{name}-{i}", **options).remote(self._recipe) for i in range(count)]
            self._pools[needs] = pool
        return pool


def cluster_report(address: str, timeout: float = 10.0) -> dict[str, Any]:
    """The cluster's nodes (alive, address, slots) and every segment driver's report, for ``groundstate status``."""
    ray = _join(address)
    nodes = [{"node": n["NodeID"], "alive": bool(n["Alive"]), "address": n["NodeManagerAddress"],
              "slots": n.get("Resources", {}).get(SLOT, 0)} for n in ray.nodes()]  # fmt: skip
    drivers = []
    for named in ray.util.list_named_actors(all_namespaces=True):
        if named["namespace"] == NAMESPACE and named["name"].startswith(DRIVER_PREFIX):
            try:
                handle = ray.get_actor(named["name"], namespace=NAMESPACE)
                drivers.append({"name": named["name"], **ray.get(handle.report.remote(), timeout=timeout)})
            except Exception as exc:  # a driver being restarted or gone: shown as such, the others still are
                drivers.append({"name": named["name"], "error": f"{type(exc).__name__}: {exc}"})
    return {"nodes": nodes, "drivers": drivers}


def _join(address: str, timeout: float = 5.0) -> Any:
    """This process connected to the cluster at ``address`` (``ray``); RunExecutorError, at once, when nothing answers
    there (Ray itself waits minutes for an absent head) or this process is already in another cluster."""
    ray = _ray()
    host, _, port = address.rpartition(":")
    if ray.is_initialized():
        connected = ray.get_runtime_context().gcs_address
        if connected.rpartition(":")[2] != port:
            raise RunExecutorError(f"ray://{address}: this process is already connected to the Ray cluster at "
                                f"{connected}")  # fmt: skip
        return ray
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        raise RunExecutorError(f"ray://{address}: no Ray head answers there ({exc}); start one with "
                            f"`ray start --head --port {port}`, or give its address") from None  # fmt: skip
    try:
        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RunExecutorError(f"ray://{address}: cannot join the Ray cluster there: {exc}") from None
    return ray


def _ray() -> Any:
    """The ``ray`` module, or RunExecutorError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RunExecutorError("the Ray executor needs Ray: pip install 'groundstate[ray]'") from None
    return ray
