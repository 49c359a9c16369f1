"""``groundstate worker`` and ``groundstate status``: the pool of machines that drive runs, and what it is doing."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ..config import CONFIG_OPTION, DB_OPTION, EXECUTOR_OPTION
from ..errors import ConfigurationError, GroundstateError, exit_code
from ..terminal_console import SafeConsole
from .configured import configured_runtime
from .executors import ray_head
from .runner import Runtime
from .state import AWAITING_APPROVAL, PENDING, RUNNING
from .store import INTERRUPTED

console = SafeConsole()  # model and store text shown, never obeyed (terminal_text.py)


def worker(
    address: str = typer.Option(..., "--address", help="The Ray head's HOST:PORT (as `ray start --head` prints it)."),
    slots: int = typer.Option(4, "--slots", min=1, max=1000, help="Segment drivers this machine may host."),
    node_ip: str | None = typer.Option(
        None,
        "--node-ip",
        help="This machine's address on the cluster's private network, where Ray listens (default: 127.0.0.1 when "
        "the head is on loopback; otherwise required).",
    ),
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Join this machine to the Ray pool that drives runs.

    A Ray node offering SLOTS segment drivers, once this machine has shown that it reaches the store and can write
    the runs directory; it runs until stopped (Ctrl+C or SIGTERM), and then leaves the pool. Ray's ports accept jobs
    without authentication, so the node listens only on the address named (never every interface)."""
    try:
        listen = node_address(address, node_ip)
        runtime = configured_runtime(db, config)
        runs_dir = _writable(runtime)
    except (GroundstateError, OSError) as exc:
        console.print(f"error: this machine cannot drive runs: {exc}", markup=False, highlight=False)
        raise typer.Exit(exit_code(exc) if isinstance(exc, GroundstateError) else 2) from None
    ray = Path(sys.executable).parent / "ray"
    binary = str(ray) if ray.exists() else shutil.which("ray")
    if binary is None:
        console.print("error: Ray is not installed: pip install 'groundstate[ray]'", markup=False, highlight=False)
        raise typer.Exit(2)
    from .ray_executor import SLOT

    command = [binary, "start", "--address", address, "--node-ip-address", listen, "--resources",
               json.dumps({SLOT: slots}), "--block"]  # fmt: skip
    console.print(f"joining the Ray cluster at {address} with {slots} segment-driver slots (store: "
                  f"{_redacted(runtime.store.url)}, runs: {runs_dir})", markup=False, highlight=False)  # fmt: skip
    sys.stdout.flush()
    os.execv(binary, command)  # Ray's own node process from here on: stopping it (Ctrl+C, SIGTERM) leaves the pool


def node_address(head: str, named: str | None) -> str:
    """The address this node's Ray listens on: the one named, else loopback for a head on loopback (a one-machine
    cluster); a head elsewhere needs it named (ConfigurationError), for Ray would otherwise pick the machine's network
    interface and accept unauthenticated jobs there."""
    if named:
        return named
    host = head.removeprefix("ray://").rpartition(":")[0] or head.removeprefix("ray://")
    if host.strip("[]") in ("127.0.0.1", "localhost", "::1"):
        return "127.0.0.1"
    raise ConfigurationError(f"the Ray head {head} is not on this machine's loopback: name this machine's address on "
                             "the cluster's private network with --node-ip (Ray's ports accept jobs without "
                             "authentication; see docs/scale-out.md)")  # fmt: skip


def status(
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
    executor: str | None = EXECUTOR_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """The pool: leases, queue depth, nodes and their drivers.

    Leases (who drives which run, live or lapsed), the queue depth (runs no driver has), and with a Ray executor the
    cluster's nodes with their slots and the segments the drivers on each have driven."""
    try:
        runtime = configured_runtime(db, config)
        address = executor or runtime.settings.executor.address
        report = {"store": _store_report(runtime), "cluster": _cluster(address)}
    except GroundstateError as exc:
        console.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(exit_code(exc)) from None
    if as_json:
        print(json.dumps(report, indent=2, default=str))
        return
    _print(report)


def _writable(runtime: Runtime) -> Path:
    """The runs directory, created if needed and proven writable (OSError saying why not)."""
    runtime.runs_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=runtime.runs_dir, prefix=".worker-check-"):
        pass
    return runtime.runs_dir


def _redacted(url: str) -> str:
    """A store URL without its password."""
    head, at, tail = url.rpartition("@")
    if not at or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, user = head.partition("//")
    return f"{scheme}//{user.split(':', 1)[0]}:***@{tail}"


def _store_report(runtime: Runtime) -> dict[str, Any]:
    """Leases and the queue, from the store every node shares."""
    now = datetime.now(UTC)
    by_status = Counter(str(row["status"]) for row in runtime.store.runs())
    leases = [{"run": run, "holder": holder, "expires_at": until.isoformat(), "live": until > now}
              for run, holder, until in runtime.store.leases()]  # fmt: skip
    return {
        "leases": leases,
        "queue_depth": by_status.get(PENDING, 0) + by_status.get(INTERRUPTED, 0),  # runs no driver has
        "driving": by_status.get(RUNNING, 0),
        "awaiting_operator": by_status.get(AWAITING_APPROVAL, 0),
        "runs": by_status,
    }


def _cluster(address: str) -> dict[str, Any] | None:
    """The Ray cluster's nodes and drivers (None for the local executor)."""
    head = ray_head(address)
    if head is None:
        return None
    from .ray_executor import cluster_report

    report = cluster_report(head)
    per_node: dict[str, dict[str, float]] = {}
    for driver in report["drivers"]:
        if "metrics" in driver:
            counts = per_node.setdefault(driver["node"], {})
            for status, value in _segments(driver.pop("metrics")).items():
                counts[status] = counts.get(status, 0) + value
    for node in report["nodes"]:
        node["segments"] = per_node.get(node["node"], {})
    return report


def _segments(metrics: str) -> dict[str, float]:
    """``groundstate_segments_total`` by status, from a driver's Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "groundstate_segments_total":
                found[sample.labels["status"]] = sample.value
    return found


def _print(report: dict[str, Any]) -> None:
    store = report["store"]
    console.print(f"queue depth: {store['queue_depth']} (runs no driver has)   driving: {store['driving']}   "
                  f"awaiting an operator: {store['awaiting_operator']}", markup=False, highlight=False)  # fmt: skip
    leases = Table("run", "holder", "expires", "live", title="leases")
    for lease in store["leases"]:
        leases.add_row(lease["run"], lease["holder"], lease["expires_at"], "yes" if lease["live"] else "lapsed")
    console.print(leases)
    cluster = report["cluster"]
    if cluster is None:
        console.print("executor: local (runs are driven by the process that starts or unpauses them)")
        return
    nodes = Table("node", "address", "alive", "slots", "segments driven", title="nodes")
    for node in cluster["nodes"]:
        driven = ", ".join(f"{k}: {v:g}" for k, v in sorted(node["segments"].items())) or "-"
        nodes.add_row(node["node"][:12], node["address"], "yes" if node["alive"] else "no", f"{node['slots']:g}",
                      driven)  # fmt: skip
    console.print(nodes)
    for driver in cluster["drivers"]:
        if "error" in driver:
            console.print(f"driver {driver['name']}: {driver['error']}", markup=False, highlight=False)
