"""Runs per minute for many concurrent runs of a 5-agent workflow on an I/O-bound model (each call waits 200 ms):
in-process versus segment drivers on a Ray cluster (1, 2 and 4 driver processes on this machine), over the same
PostgreSQL store; the latency Ray adds to one run; the CPU each run costs; and what that predicts for N machines.

    python bench/scale/run.py            # 200 concurrent runs per configuration
    python bench/scale/run.py --quick    # 20, a smoke test

Every run of every configuration must complete with the same outcome (each agent's output), or the benchmark fails.
The model (bench/scale/model_server.py) and PostgreSQL run in their own processes; the Ray cluster is
``ray.cluster_utils.Cluster`` (a head without slots and one worker node with 4).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))  # tests.postgres: the same server the tests start

from tests.postgres import running_postgres

from groundstate.config import ProjectConfig
from groundstate.runtime import AGENT_COMPLETED, EventStore, InProcessExecutor, NodeCreated, Runtime, open_executor

FLOW = """
name: five
agents:
  - id: writer_a
    instructions: Outline.
  - id: writer_b
    instructions: Draft part one.
    depends_on: [writer_a]
  - id: writer_c
    instructions: Draft part two.
    depends_on: [writer_a]
  - id: writer_d
    instructions: Merge.
    depends_on: [writer_b, writer_c]
  - id: writer_e
    instructions: Polish.
    depends_on: [writer_d]
"""
CRITICAL_PATH = 4  # model calls one after another in a run: a, b|c, d, e


def outcome(runtime: Runtime, run_id: str) -> tuple[str, tuple[tuple[str | None, str], ...]]:
    """The run's status and each agent's output."""
    state = runtime.store.state(run_id)
    events = runtime.store.events(run_id)
    outputs = sorted((e.agent, str(e.payload.get("output"))) for e in events if e.type == AGENT_COMPLETED)
    return state.status, tuple(outputs)


async def drive_all(executor: Any, run_ids: list[str]) -> None:
    await asyncio.gather(*(executor.drive(run_id) for run_id in run_ids))


def measure(runtime: Runtime, executor: Any, spec: str, runs: int, cpu: Any) -> dict[str, Any]:
    """Create ``runs`` runs, drive them all at once; wall time, CPU seconds (``cpu()`` before and after), outcomes."""
    run_ids = [runtime.create(FLOW, "five.yaml", spec) for _ in range(runs)]
    before, started = cpu(), time.perf_counter()
    asyncio.run(drive_all(executor, run_ids))
    wall, spent = time.perf_counter() - started, cpu() - before
    outcomes = {outcome(runtime, run_id) for run_id in run_ids}
    events = sum(len(runtime.store.events(run_id)) for run_id in run_ids)
    return {"wall": wall, "cpu": spent, "outcomes": outcomes, "events": events / runs}


def single_latency(runtime: Runtime, executor: Any, spec: str, repeats: int) -> float:
    """Median seconds for one run alone, start to end."""
    times = []
    for _ in range(repeats):
        run_id = runtime.create(FLOW, "five.yaml", spec)
        started = time.perf_counter()
        asyncio.run(drive_all(executor, [run_id]))
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def append_rate(store_url: str, count: int) -> float:
    """Events per second one writer appends to the store (the floor of what the store takes)."""
    store = EventStore(store_url)
    run_id = store.create_run("bench", FLOW, "m")
    started = time.perf_counter()
    for i in range(count):
        store.append(run_id, NodeCreated(agent=f"writer_{i}"))
    return count / (time.perf_counter() - started)


def parallel_append_rate(store_url: str, count: int, writers: int) -> float:
    """Events per second ``writers`` processes append together, each to its own run (as drivers on many nodes do;
    one process's store serialises its own appends)."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(writers) as pool:
        started = time.perf_counter()
        pool.starmap(append_rate, [(store_url, count)] * writers)
        return count * writers / (time.perf_counter() - started)


def on_ray(store_url: str, home: Path, spec: str, runs: int, rows: list[tuple[str, dict[str, Any]]]) -> float:
    """The Ray rows (1, 2 and 4 driver processes on one worker node with 4 slots); returns one run's latency."""
    ray: Any = importlib.import_module("ray")
    cluster = importlib.import_module("ray.cluster_utils").Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=2, resources={"groundstate": 4})
    ray.init(address=cluster.address, logging_level=30, log_to_driver=False)
    alone = 0.0
    try:
        for processes in (1, 2, 4):
            settings = ProjectConfig.model_validate({"executor": {"address": f"ray://{cluster.address}",
                                                                  "processes": processes}})  # fmt: skip
            runtime = Runtime(EventStore(store_url), home, settings=settings, lease_seconds=30)
            executor: Any = open_executor(runtime)
            drivers = [d for pool in executor._pools.values() for d in pool]

            def cpu(drivers: list[Any] = drivers) -> float:
                return float(sum(r["cpu_seconds"] for r in ray.get([d.report.remote() for d in drivers])))

            single_latency(runtime, executor, spec, 1)  # the drivers' runtimes built and warm
            name = f"Ray, {processes} driver process{'es' if processes > 1 else ''}"
            rows.append((name, measure(runtime, executor, spec, runs, cpu)))
            if processes == 1:
                alone = single_latency(runtime, executor, spec, 5)
            executor.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
    return alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 runs per configuration")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds each model call waits")
    args = parser.parse_args()
    runs = 20 if args.quick else args.runs
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("model_server.py")), str(args.delay)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    home = Path(tempfile.mkdtemp(prefix="groundstate-bench-scale-"))
    os.environ["GROUNDSTATE_HOME"] = str(home)
    try:
        port = int(server.stdout.readline()) if server.stdout else 0
        spec = f"openai-chat:bench@http://127.0.0.1:{port}"
        with running_postgres() as store_url:
            rows: list[tuple[str, dict[str, Any]]] = []
            local = Runtime(EventStore(store_url), home, lease_seconds=30)
            here = InProcessExecutor(local)
            rows.append(("in-process", measure(local, here, spec, runs, time.process_time)))
            alone_local = single_latency(local, here, spec, 5)
            alone_ray = on_ray(store_url, home, spec, runs, rows)
            appends = append_rate(store_url, 2000)
            together = parallel_append_rate(store_url, 1000, 4)
    finally:
        server.terminate()
    expected = rows[0][1]["outcomes"]
    assert len(expected) == 1 and next(iter(expected))[0] == "completed", expected
    for name, row in rows:
        assert row["outcomes"] == expected, f"{name}: outcomes differ from in-process: {row['outcomes']}"
    floor = CRITICAL_PATH * args.delay
    print(f"{runs} concurrent runs of a 5-agent workflow, each model call {args.delay * 1000:.0f} ms "
          f"(critical path {floor:.1f} s); {platform.python_version()}, {os.cpu_count()} cores")  # fmt: skip
    print("| executor | wall s | runs/min | CPU ms per run | events per run |")
    print("|---|---:|---:|---:|---:|")
    for name, row in rows:
        print(f"| {name} | {row['wall']:.1f} | {runs / row['wall'] * 60:.0f} | {row['cpu'] / runs * 1000:.0f} | "
              f"{row['events']:.0f} |")  # fmt: skip
    print(f"one run alone: in-process {alone_local * 1000:.0f} ms, Ray {alone_ray * 1000:.0f} ms "
          f"(Ray adds {(alone_ray - alone_local) * 1000:.0f} ms; the floor is {floor * 1000:.0f} ms)")  # fmt: skip
    print(f"store: one writer appends {appends:.0f} events/s to PostgreSQL; four writer processes together "
          f"{together:.0f} events/s")  # fmt: skip


if __name__ == "__main__":
    main()
