"""Runs driven by segment drivers on a real Ray cluster (``ray.cluster_utils.Cluster``: a head and two worker nodes on
this machine) over a real PostgreSQL store: the same results as in-process, a node lost mid-run, a console decision
that wakes a run elsewhere, a lapsed lease taken over, runs placed where their model's resources are, and the
``worker`` and ``status`` commands."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from groundstate.config import ProjectConfig
from groundstate.console import create_app
from groundstate.runtime import (
    AGENT_COMPLETED,
    APPROVAL_DECIDED,
    RUN_RESUMED,
    RUN_STARTED,
    TOOL_RESULT,
    EventStore,
    InProcessExecutor,
    RunStarted,
    RunState,
    Runtime,
    open_executor,
)

from .conftest import Script, envelope

try:
    ray: Any = importlib.import_module("ray")  # untyped: used through Any
    Cluster: Any = importlib.import_module("ray.cluster_utils").Cluster
except ImportError:  # pragma: no cover - CI installs the ray extra
    if os.environ.get("CI"):
        raise
    pytest.skip("Ray is not installed (pip install 'groundstate[ray]')", allow_module_level=True)

FLEET = """
name: fleet
agents:
  - id: research_a
    instructions: Find it.
    tools: [web_search]
  - id: writer_b
    instructions: Write the brief.
    depends_on: [research_a]
  - id: writer_c
    instructions: Write the summary.
    depends_on: [research_a]
"""
SLOTS = 8


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head (no segment-driver slots, like a head that only serves the console) and two worker nodes."""
    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        made.add_node(num_cpus=1, resources={"groundstate": SLOTS})
    ray.init(address=made.address, logging_level=30, log_to_driver=False)
    made.wait_for_nodes()
    yield made
    ray.shutdown()
    made.shutdown()


def script_fleet(script: Script, delay: float = 0.0, pause_first: bool = False) -> None:
    """The fleet's answers; ``pause_first``: research_a first answers without its search, so the guards pause it
    (answers by request, not by round, for the retry to get the search)."""
    script.by_round = not pause_first  # every run gets the same answers
    first = [envelope("From memory. [STATUS: SUCCESS]")] if pause_first else []
    script.answers = {"research_a": [*first, envelope("x", [{"tool": "web_search", "argument": "battery"}]),
                                     envelope("Found: batteries. [STATUS: SUCCESS]")],
                      "writer_b": [envelope("The brief. [STATUS: SUCCESS]")],
                      "writer_c": [envelope("The summary. [STATUS: SUCCESS]")]}  # fmt: skip
    script.delays = {agent: delay for agent in script.answers}


def ray_runtime(store_url: str, home: Path, address: str, lease_seconds: float = 30.0, endpoints: tuple[str, ...] = (),
                self_approval: tuple[str, ...] = (), **executor: Any) -> Runtime:  # fmt: skip
    settings = ProjectConfig.model_validate({"executor": {"address": f"ray://{address}", **executor},
                                             "models": {"endpoints": list(endpoints)},
                                             "access": {"self_approval": list(self_approval)}})  # fmt: skip
    return Runtime(EventStore(store_url), home, settings=settings, lease_seconds=lease_seconds)


def drive_all(executor: Any, run_ids: list[str]) -> list[RunState]:
    async def every() -> list[RunState]:
        return list(await asyncio.gather(*(executor.drive(run_id) for run_id in run_ids)))

    return asyncio.run(every())


def outcome(runtime: Runtime, run_id: str) -> tuple[Any, ...]:
    """What a run did, without what depends on timing: its status, each agent's status and output, its events."""
    state = runtime.store.state(run_id)
    events = runtime.store.events(run_id)
    outputs = sorted((e.agent, e.payload.get("output")) for e in events if e.type == AGENT_COMPLETED)
    kinds = sorted(Counter((e.type, e.agent) for e in events).items(), key=str)
    return state.status, sorted((a, n.status) for a, n in state.nodes.items()), outputs, kinds


def drivers(runtime: Runtime, run_ids: list[str]) -> list[str]:
    """The driver named by each segment's RunStarted/RunResumed event."""
    return [e.payload["driver"] for run_id in run_ids for e in runtime.store.events(run_id)
            if e.type in (RUN_STARTED, RUN_RESUMED)]  # fmt: skip


def exactly_once(runtime: Runtime, run_id: str) -> None:
    """The run's log is contiguous, every agent completed once, no tool call ran twice."""
    events = runtime.store.events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert Counter(e.agent for e in events if e.type == AGENT_COMPLETED) == {"research_a": 1, "writer_b": 1,
                                                                               "writer_c": 1}  # fmt: skip
    results = [(e.agent, json.dumps(e.payload.get("call"), sort_keys=True)) for e in events if e.type == TOOL_RESULT]
    assert len(results) == len(set(results)) >= 1


def test_fifty_runs_across_the_nodes_end_as_they_do_in_process(
    cluster: Any, postgres: str, tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script_fleet(script)
    runtime = ray_runtime(postgres, tmp_path, cluster.address, processes=2)
    executor = open_executor(runtime)
    try:
        assert executor.remote and "2 segment drivers" in executor.description
        spec = f"openai-chat:scripted@{url}"
        run_ids = [runtime.create(FLEET, "fleet.yaml", spec) for _ in range(50)]
        states = drive_all(executor, run_ids)
    finally:
        executor.close()
    assert [s.status for s in states] == ["completed"] * 50
    local = Runtime(EventStore(f"sqlite:///{tmp_path / 'local.db'}"), tmp_path / "local")
    local_ids = [local.create(FLEET, "fleet.yaml", spec) for _ in range(3)]
    drive_all(InProcessExecutor(local), local_ids)
    expected = outcome(local, local_ids[0])
    assert expected[0] == "completed"
    assert all(outcome(local, run_id) == expected for run_id in local_ids)
    assert [outcome(runtime, run_id) for run_id in run_ids] == [expected] * 50
    for run_id in run_ids:
        exactly_once(runtime, run_id)
    nodes = {holder.split(":")[0].split("/")[1] for holder in drivers(runtime, run_ids)}
    workers = {n.node_id[:12] for n in cluster.worker_nodes}
    assert nodes == workers  # both worker nodes drove runs; the head (no slots) none
    assert not any(str(os.getpid()) == h.split(":")[1] for h in drivers(runtime, run_ids))


def test_a_console_decision_wakes_a_run_that_paused_on_another_node(
    cluster: Any, postgres: str, tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script_fleet(script, pause_first=True)
    runtime = ray_runtime(postgres, tmp_path, cluster.address, processes=2, endpoints=(url,),  # accounts may use it
                          self_approval=("admin",))  # the one account starts the run and decides its pause
    app = create_app(runtime, "console-token", open_executor(runtime))
    with TestClient(app) as client:
        client.headers["Authorization"] = "Bearer console-token"
        created = client.post("/api/runs", json={"workflow": FLEET, "model": f"openai-chat:scripted@{url}"})
        run_id = created.json()["run_id"]
        paused = wait_for(runtime, run_id, {"awaiting_approval"})
        assert "web_search" in paused.pauses[0].reason  # a mandatory tool was never run: the guard paused it
        pause = paused.pauses[0].id
        answer = client.post(f"/api/runs/{run_id}/decision", json={"decision": "retry", "pause": pause})
        assert answer.status_code == 200, answer.text
        assert wait_for(runtime, run_id, {"completed", "failed"}).status == "completed"
    segments = drivers(runtime, [run_id])
    assert len(segments) == 2 and all("/" in holder for holder in segments)  # both segments on cluster nodes
    assert not any(f":{os.getpid()}:" in holder for holder in segments)  # never in the console's process
    decided = [e for e in runtime.store.events(run_id) if e.type == APPROVAL_DECIDED]
    assert decided[0].actor.startswith("operator:")


def test_a_run_whose_driver_is_gone_is_taken_over_by_the_console(
    cluster: Any, postgres: str, tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script_fleet(script)
    runtime = ray_runtime(postgres, tmp_path, cluster.address, lease_seconds=1.5, processes=1)
    run_id = runtime.create(FLEET, "fleet.yaml", f"openai-chat:scripted@{url}")
    gone = "elsewhere:1:dead"  # a driver that started the run and died: its lease is never renewed
    runtime.store.acquire_lease(run_id, gone, 1.5)
    runtime.store.append(run_id, RunStarted(model="x", driver=gone), holder=gone)
    with TestClient(create_app(runtime, "console-token", open_executor(runtime))):
        state = wait_for(runtime, run_id, {"completed", "failed"})
    assert state.status == "completed"
    exactly_once(runtime, run_id)
    resumed = [e for e in runtime.store.events(run_id) if e.type == RUN_RESUMED]
    assert len(resumed) == 1 and "/" in resumed[0].payload["driver"]


def test_runs_are_driven_where_their_model_has_its_resources(
    cluster: Any, postgres: str, tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script_fleet(script)
    gpu_node = cluster.add_node(num_cpus=1, resources={"groundstate": 2, "big_model": 1})
    try:
        runtime = ray_runtime(postgres, tmp_path, cluster.address, processes=2,
                              resources={"openai-chat:big": {"big_model": 1}})  # fmt: skip
        executor = open_executor(runtime)
        try:
            big = [runtime.create(FLEET, "fleet.yaml", f"openai-chat:big@{url}") for _ in range(3)]
            small = [runtime.create(FLEET, "fleet.yaml", f"openai-chat:small@{url}") for _ in range(3)]
            assert [s.status for s in drive_all(executor, big + small)] == ["completed"] * 6
        finally:
            executor.close()
        on = {holder.split(":")[0].split("/")[1] for holder in drivers(runtime, big)}
        assert on == {gpu_node.node_id[:12]}
    finally:
        cluster.remove_node(gpu_node)


def test_worker_joins_the_pool_and_status_shows_it(cluster: Any, postgres: str, tmp_path: Path) -> None:
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")}
    before = ray.cluster_resources().get("groundstate", 0)
    host = cluster.address.rpartition(":")[0]  # this machine's address, where the test cluster's head listens
    command = ["groundstate", "worker", "--address", cluster.address, "--node-ip", host, "--slots", "3", "--db",
               postgres]  # fmt: skip
    pipe = subprocess.PIPE
    worker = subprocess.Popen(command, env=env, stdout=pipe, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while ray.cluster_resources().get("groundstate", 0) < before + 3:
            assert worker.poll() is None, worker.stdout.read().decode() if worker.stdout else ""
            assert time.monotonic() < deadline, "the worker never joined"
            time.sleep(0.5)
        runtime = ray_runtime(postgres, tmp_path, cluster.address)
        pending = runtime.create(FLEET, "fleet.yaml", "openai-chat:m@http://127.0.0.1:9")  # never driven
        shown = subprocess.run(["groundstate", "status", "--executor", f"ray://{cluster.address}", "--db", postgres,
                                "--json"], env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        report = json.loads(shown.stdout)
        assert report["store"]["queue_depth"] >= 1 and report["store"]["runs"]["pending"] >= 1
        slots = sorted(node["slots"] for node in report["cluster"]["nodes"] if node["alive"])
        assert slots == sorted([0, SLOTS, SLOTS, 3])
        assert runtime.store.state(pending).status == "pending"
        table = subprocess.run(["groundstate", "status", "--db", postgres], env=env, capture_output=True, text=True,
                               timeout=60)  # fmt: skip
        assert table.returncode == 0 and "queue depth:" in table.stdout and "executor: local" in table.stdout
        nodes = subprocess.run(["groundstate", "status", "--db", postgres, "--executor", f"ray://{cluster.address}"],
                               env={**env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert nodes.returncode == 0, nodes.stdout + nodes.stderr
        assert "nodes" in nodes.stdout and "segments driven" in nodes.stdout and "Traceback" not in nodes.stderr
        assert sum(1 for line in nodes.stdout.splitlines() if " yes " in line and " 3 " in line) == 1  # the worker
    finally:
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=90)
    assert b"segment-driver slots" in out
    deadline = time.monotonic() + 60
    while ray.cluster_resources().get("groundstate", 0) > before:  # it left the pool
        assert time.monotonic() < deadline, "the worker's node is still in the pool"
        time.sleep(0.5)


def test_a_worker_that_cannot_write_the_runs_directory_does_not_join(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    config = tmp_path / "groundstate.toml"
    config.write_text(f'[executor]\nruns_dir = "{blocked}/runs"\n')
    done = subprocess.run(["groundstate", "worker", "--address", "127.0.0.1:1", "--config", str(config)],
                          env={**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")}, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode != 0
    assert "cannot drive runs" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_a_worker_listens_only_on_an_address_it_was_given(tmp_path: Path) -> None:
    """Ray's ports accept jobs without authentication: a worker joining a head elsewhere must be told its own address
    on the private network (--node-ip), and never falls back to every interface."""
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")}
    refused = subprocess.run(["groundstate", "worker", "--address", "10.1.2.3:6379"], env=env, capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 2 and "--node-ip" in refused.stdout and "Traceback" not in refused.stderr
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    config = tmp_path / "groundstate.toml"
    config.write_text(f'[executor]\nruns_dir = "{blocked}/runs"\n')
    named = subprocess.run(["groundstate", "worker", "--address", "10.1.2.3:6379", "--node-ip", "10.1.2.4",
                            "--config", str(config)], env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "--node-ip" not in named.stdout and "cannot drive runs" in named.stdout  # past the address check


def test_an_unknown_executor_is_refused_saying_what_to_use(tmp_path: Path) -> None:
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'gs.db'}"), tmp_path)
    with pytest.raises(Exception, match="use 'local' or 'ray://HOST:PORT'"):
        open_executor(runtime, "celery://somewhere")


def test_a_node_lost_mid_flight_leaves_every_run_completed_exactly_once(
    cluster: Any, postgres: str, tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script_fleet(script, delay=1.0)
    # research_a's search runs early (its first answer comes at once); the node is lost while every run waits for
    # research_a's second answer, so no call is in flight then (that case becomes a pause: test_tool_journal)
    script.delays["research_a"] = [0.1, 3.0]
    runtime = ray_runtime(postgres, tmp_path, cluster.address, lease_seconds=3.0, processes=2)
    executor = open_executor(runtime)
    try:
        run_ids = [runtime.create(FLEET, "fleet.yaml", f"openai-chat:scripted@{url}") for _ in range(12)]
        homes = {ray.get(driver.report.remote())["node"] for pool in executor._pools.values() for driver in pool}  # type: ignore[attr-defined]
        victim = next(n for n in cluster.worker_nodes if n.node_id in homes)

        async def lose_a_node() -> list[RunState]:
            driving = asyncio.gather(*(executor.drive(run_id) for run_id in run_ids))
            await asyncio.sleep(1.5)  # every run has searched and waits for research_a's second answer
            await asyncio.to_thread(cluster.remove_node, victim)
            return list(await driving)

        states = asyncio.run(lose_a_node())
    finally:
        executor.close()
        cluster.add_node(num_cpus=1, resources={"groundstate": SLOTS})  # the cluster as the other tests had it
    assert [s.status for s in states] == ["completed"] * len(run_ids)
    for run_id in run_ids:
        exactly_once(runtime, run_id)
    resumed = [e for run_id in run_ids for e in runtime.store.events(run_id) if e.type == RUN_RESUMED]
    assert resumed, "no run was taken over: the lost node drove none"
    assert all(victim.node_id[:12] not in e.payload["driver"] for e in resumed)


def home_of_the_first_admin(tmp_path: Path) -> dict[str, str]:
    """An environment whose state directory holds the token of the module's store's first admin (whichever test
    touches the store first creates that account from its token), for commands that act as an operator."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "console.token").write_text("console-token")
    (home / "console.token").chmod(0o600)
    return {**os.environ, "GROUNDSTATE_HOME": str(home)}


def wait_for(runtime: Runtime, run_id: str, statuses: set[str], seconds: float = 120.0) -> RunState:
    deadline = time.monotonic() + seconds
    while True:
        state = runtime.store.state(run_id)
        if state.status in statuses:
            return state
        assert time.monotonic() < deadline, f"run {run_id} stayed {state.status}"
        time.sleep(0.2)


def test_run_and_resume_from_the_command_line_drive_on_the_cluster(
    cluster: Any, postgres: str, tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script_fleet(script, pause_first=True)
    flow = tmp_path / "fleet.yaml"
    flow.write_text(FLEET)
    config = tmp_path / "groundstate.toml"
    config.write_text(f'[store]\nurl = "{postgres}"\n\n[executor]\naddress = "ray://{cluster.address}"\nprocesses = 1\n'
                      f'runs_dir = "shared-runs"\n')  # fmt: skip
    env = home_of_the_first_admin(tmp_path)
    spec = f"openai-chat:scripted@{url}"
    first = subprocess.run(["groundstate", "run", str(flow), "--model", spec, "--config", str(config)], env=env,
                           capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)  # fmt: skip
    assert first.returncode == 3, first.stdout + first.stderr  # paused: the command's configuration chose the cluster
    assert "segments are driven on the Ray cluster" in first.stdout
    store = EventStore(postgres)
    run_id = next(row["id"] for row in store.runs() if row["status"] == "awaiting_approval")
    assert (tmp_path / "shared-runs" / run_id / "recordings").is_dir()  # [executor] runs_dir, beside the file
    decided = subprocess.run(["groundstate", "runs", "decide", run_id, "retry", "--config", str(config)], env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert decided.returncode == 0, decided.stdout + decided.stderr
    resumed = subprocess.run(["groundstate", "runs", "resume", run_id, "--config", str(config), "--executor",
                              f"ray://{cluster.address}"], env=env, capture_output=True, text=True, timeout=180,
                             stdin=subprocess.DEVNULL)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert store.state(run_id).status == "completed"
    segments = [e.payload["driver"] for e in store.events(run_id) if e.type in (RUN_STARTED, RUN_RESUMED)]
    workers = {n.node_id[:12] for n in cluster.worker_nodes}
    assert len(segments) == 2 and all(holder.split(":")[0].split("/")[1] in workers for holder in segments)
    here = ["groundstate", "run", str(flow), "--model", spec, "--config", str(config), "--executor", "local"]
    local = subprocess.run([*here, "--decide", "skip"], env=env, capture_output=True, text=True, timeout=180)
    assert "segments are driven" not in local.stdout  # --executor wins over the configuration
    last = store.runs()[0]["id"]
    assert all("/" not in e.payload["driver"] for e in store.events(last) if e.type == RUN_STARTED)


def test_serve_with_a_cluster_executor_drives_the_runs_it_starts_there(
    cluster: Any, postgres: str, tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script_fleet(script)
    env = home_of_the_first_admin(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "serve.toml").write_text(f'[models]\nendpoints = ["{url}"]\n')  # runs accounts start may use it
    command = ["groundstate", "serve", "--port", str(port), "--db", postgres, "--executor", f"ray://{cluster.address}",
               "--config", str(tmp_path / "serve.toml")]  # fmt: skip
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines: list[str] = []
        while not any("console: http://" in line for line in lines):
            line = server.stdout.readline() if server.stdout else ""
            assert line, "".join(lines)
            lines.append(line)
        assert "runs are driven on the Ray cluster" in "".join(lines)
        deadline = time.monotonic() + 60
        while True:  # the line comes as the server starts: wait until it listens
            try:
                httpx.get(f"http://127.0.0.1:{port}/login", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and server.poll() is None, "the console never listened"
                time.sleep(0.2)
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": "Bearer console-token"}
        ) as api:
            created = api.post("/api/runs", json={"workflow": FLEET, "model": f"openai-chat:scripted@{url}"})
            assert created.status_code == 201, created.text
            run_id = created.json()["run_id"]
        runtime = Runtime(EventStore(postgres), tmp_path)
        assert wait_for(runtime, run_id, {"completed", "failed"}).status == "completed"
        assert all("/" in holder for holder in drivers(runtime, [run_id]))
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_an_address_where_no_head_answers_is_refused_at_once(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, _ = model
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    flow = tmp_path / "fleet.yaml"
    flow.write_text(FLEET)
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")}
    started = time.monotonic()
    command = ["groundstate", "run", str(flow), "--model", f"openai-chat:m@{url}"]
    done = subprocess.run([*command, "--executor", f"ray://127.0.0.1:{port}"], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"ray://127.0.0.1:{port}: no Ray head answers there" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert time.monotonic() - started < 60  # not Ray's own minutes-long wait for an absent head
    listed = subprocess.run(["groundstate", "runs", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert "run-" not in listed.stdout  # refused before the run was created: nothing left behind


def test_a_process_in_one_cluster_refuses_an_executor_for_another(cluster: Any, tmp_path: Path) -> None:
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'gs.db'}"), tmp_path)
    with pytest.raises(Exception, match="already connected to the Ray cluster at"):
        open_executor(runtime, "ray://127.0.0.1:1")
