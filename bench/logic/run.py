"""Benchmark the logic engine against clingo, mangle-py and pyDatalog: same programs, same data, same run.

    python bench/logic/run.py                # the full table (tens of minutes: the slow peers dominate)
    python bench/logic/run.py --quick        # small sizes, a smoke test
    python bench/logic/run.py --only chain   # workloads whose name contains "chain"

Every measurement runs in a fresh process (so peak RSS is that run's own), several times; the table shows
the best and the median. A row whose answer count differs from the independently computed one (or from
clingo's, for the policy workload) is marked WRONG and its ratio is not reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from engines import RUNNERS, mangle_text  # noqa: E402
from workloads import Workload, workload_factories  # noqa: E402

PEERS = ["groundstate", "clingo", "mangle-py", "pyDatalog"]


def worker(engine: str, index: int, quick: bool) -> None:
    workload = workload_factories(quick)[index]()
    result = RUNNERS[engine](workload)
    result["rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


def peak_rss_mb() -> float:
    """This process's own peak RSS. ru_maxrss would not do: Linux carries it across exec, so a worker would
    report the high-water mark of the orchestrator it was forked from."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(engine: str, index: int, quick: bool, repeat: int, timeout: float) -> list[dict[str, float]] | str:
    runs: list[dict[str, float]] = []
    for _ in range(repeat):
        cmd = [sys.executable, str(HERE / "run.py"), "--worker", engine, str(index)] + (["--quick"] if quick else [])
        started = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return f"timeout (> {timeout:.0f} s)"
        if done.returncode != 0:
            return "error: " + (done.stderr.strip().splitlines() or ["?"])[-1][:80]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if time.perf_counter() - started > timeout / 4:
            break  # slow: one run is enough to place it
    return runs


def skip_reason(engine: str, workload: Workload, include_slow: bool) -> str | None:
    if include_slow:
        return None
    if (
        engine == "mangle-py"
        and "chain-right" in workload.name
        and not workload.name.endswith("N=200")
        and "N=100" not in workload.name
    ):
        return "skipped: cubic in N for right recursion (N=200 already takes about a minute)"
    if engine == "groundstate (full re-eval per update)" and not workload.updates:
        return ""
    return None


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=2, metavar=("ENGINE", "INDEX"), help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (default 3)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds before a run is abandoned")
    parser.add_argument("--only", default="", help="only workloads whose name contains this")
    parser.add_argument("--include-slow", action="store_true", help="also run the measurements skipped by default")
    parser.add_argument("--output", type=Path, help="also write the table (markdown) to this file")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.quick)
        return

    workloads = [make() for make in workload_factories(args.quick)]
    lines = [
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()};"
        f" {time.strftime('%Y-%m-%d')}; best / median of up to {args.repeat} runs, each in a fresh process.",
        "",
        "| workload | engine | best | median | of which load | answer | peak RSS | groundstate is |",
        "|---|---|---|---|---|---|---|---|",
    ]
    update_lines = [
        "",
        "Policy workload, single-fact updates (assert one fact, bring derived facts up to date, query):",
        "",
        "| engine | per update (median) | answer after the first update | groundstate incremental is |",
        "|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for index, workload in enumerate(workloads):
        if args.only and args.only not in workload.name:
            continue
        engines = PEERS + (["groundstate (full re-eval per update)"] if workload.updates else [])
        results = measure_workload(workload, index, engines, args)
        for row in result_rows(workload, engines, results):
            lines.append(row)
            print(row, flush=True)
        if workload.updates:
            update_lines += update_rows(engines, results)
    if not args.only or "chain" in args.only:
        lines.extend(["", cli_end_to_end(workloads, args.quick)])
    table = "\n".join(lines + (update_lines if len(update_lines) > 5 else []))
    print("\n".join(update_lines[4:] if len(update_lines) > 5 else []))
    print(lines[-1])
    if args.output:
        args.output.write_text(table + "\n", encoding="utf-8")


Results = dict[str, list[dict[str, float]] | str]


def measure_workload(workload: Workload, index: int, engines: list[str], args: argparse.Namespace) -> Results:
    """Each engine's runs on one workload, or why it was not run."""
    results: Results = {}
    for engine in engines:
        reason = skip_reason(engine, workload, args.include_slow)
        if reason is not None:
            if reason:
                results[engine] = reason
            continue
        print(f"  ... {workload.name}: {engine}", file=sys.stderr, flush=True)
        results[engine] = measure(engine, index, args.quick, args.repeat, args.timeout)
    return results


def result_rows(workload: Workload, engines: list[str], results: Results) -> list[str]:
    """The main table's rows for one workload: every engine's time, answer (checked) and memory."""
    expected = workload.expected
    if expected is None and isinstance(results.get("clingo"), list):
        expected = int(results["clingo"][0]["count"])  # type: ignore[index]
    ours = results.get("groundstate")
    our_best = min(r["eval"] + r["load"] for r in ours) if isinstance(ours, list) else None
    rows = []
    for engine in engines:
        runs = results.get(engine)
        if runs is None or engine.startswith("groundstate (full"):  # that one belongs to the update table
            continue
        if isinstance(runs, str):
            rows.append(f"| {workload.name} | {engine} | {runs} | | | | | |")
            continue
        totals = [r["load"] + r["eval"] for r in runs]
        count = int(runs[0]["count"])
        ok = expected is None or count == expected
        ratio = f"{min(totals) / our_best:.1f}x faster" if ok and our_best and engine != "groundstate" else ""
        rows.append(
            f"| {workload.name} | {engine} | {fmt(min(totals))} | {fmt(statistics.median(totals))} |"
            f" {fmt(min(r['load'] for r in runs))} | {count:,}{'' if ok else ' WRONG'} |"
            f" {max(r['rss_mb'] for r in runs):.0f} MB | {ratio} |"
        )
    return rows


def update_rows(engines: list[str], results: Results) -> list[str]:
    """The update table's rows: per-update time and the answer after the first update, checked against clingo."""
    ours = results.get("groundstate")
    ours_update = ours[0].get("per_update") if isinstance(ours, list) else None
    first = {e: r[0].get("first_update_count") for e, r in results.items() if isinstance(r, list)}
    reference = first.get("clingo")
    rows = []
    for engine in engines:
        runs = results.get(engine)
        if not isinstance(runs, list) or "per_update" not in runs[0]:
            continue
        per_update = statistics.median(r["per_update"] for r in runs)
        ok = reference is None or first[engine] == reference
        ratio = f"{per_update / ours_update:.0f}x faster" if ours_update and engine != "groundstate" else ""
        rows.append(f"| {engine} | {fmt(per_update)} | {int(first[engine] or 0):,}{'' if ok else ' WRONG'} | {ratio} |")
    return rows


def cli_end_to_end(workloads: list[Workload], quick: bool) -> str:
    """The CLI as a user runs it: interpreter start, parse, evaluate, print every path fact."""
    workload = next(
        w for w in workloads if w.name.startswith("chain-left") and ("100" in w.name if quick else "1000" in w.name)
    )
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "chain.mg"
        source.write_text(mangle_text(workload), encoding="utf-8")
        times = []
        lines = 0
        for _ in range(3):
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "groundstate", "logic", "run", str(source), "-q", "path(X, Y)"],
                capture_output=True,
                text=True,
                check=True,
            )
            times.append(time.perf_counter() - started)
            lines = done.stdout.count("\n")
    ok = "" if lines == workload.expected else " WRONG"
    return (
        f"CLI end to end (`groundstate logic run chain.mg -q 'path(X, Y)'`, {workload.name}, {lines:,} lines"
        f" printed{ok}): best {fmt(min(times))}, median {fmt(statistics.median(times))}."
    )


if __name__ == "__main__":
    main()
