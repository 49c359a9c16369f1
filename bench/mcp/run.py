"""Added latency of a tools/call through `groundstate mcp serve` versus calling the same upstream server directly.

    python bench/mcp/run.py            # 1,000 calls each way
    python bench/mcp/run.py --quick    # 100
    python bench/mcp/run.py --calls N  # N

It reports each path's latency and the guard's CPU time per call (its threads' time as Linux's scheduler counts it,
over the guarded blocks; issue 36's target is at most 0.5 ms), beside the echo server's on each path.

Both sides use the official `mcp` SDK client over stdio, both sessions open and the calls alternating in blocks of
50, against the same minimal server (bench/mcp/echo_server.py: one read-only tool that answers at once), so the
difference is the guard: one more stdio hop, the policy's decision (the shipped mcp.mg: read-only is permitted), the
decision's row in the ledger and the call's intent and result in the journal (SQLite).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).parents[1]))  # bench/processes.py, shared with bench/gateway
from processes import cpu_seconds, descendants

ECHO = str(Path(__file__).with_name("echo_server.py"))
GUARD = "groundstate mcp serve"


async def latencies(
    paths: dict[str, tuple[StdioServerParameters, str]], calls: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Milliseconds per call on each path, after a warm-up; both sessions stay open and the paths alternate in
    blocks of 50 calls, so that a slow moment of this shared machine falls on both. Then the CPU seconds the
    processes each path started (the guard, the echo servers) ran during that path's blocks, by command line."""
    out: dict[str, list[float]] = {name: [] for name in paths}
    cpu: dict[str, float] = {}
    async with AsyncExitStack() as stack:
        sessions = {}
        started_by: dict[str, set[int]] = {}
        for name, (params, tool) in paths.items():
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            for _ in range(20):
                answered(await session.call_tool(tool, {"text": "warm"}), "warm")
            started_by[name] = set(descendants()) - set().union(*started_by.values())
            sessions[name] = (session, tool)
        running = descendants()
        for block in range(0, calls, 50):
            for name, (session, tool) in sessions.items():
                before = {pid: cpu_seconds(pid) for pid in started_by[name]}
                for number in range(block, min(block + 50, calls)):
                    started = time.perf_counter()
                    result = await session.call_tool(tool, {"text": f"call {number}"})
                    out[name].append((time.perf_counter() - started) * 1000)
                    answered(result, f"call {number}")
                for pid, was in before.items():
                    role = f"{role_of(running[pid])} ({name})"
                    cpu[role] = cpu.get(role, 0.0) + cpu_seconds(pid) - was
    return out, cpu


def role_of(command: str) -> str:
    """What a process the benchmark started is, by its command line (the guard starts its upstream under a small
    keeper process of its own, which waits for it)."""
    if GUARD in command:
        return "the guard"
    return "the echo server" if command.split()[1:2] == [ECHO] else "the guard's keeper"


def answered(result: Any, text: str) -> None:
    """Both paths' answers are checked equal to the echo's: a call the guard refused or held is not measured as
    one it forwarded (it stops the benchmark, saying why)."""
    said = [getattr(block, "text", None) for block in result.content]
    if result.is_error or said != [text]:
        raise NotForwarded(f"the call with {text!r} was answered {said!r} (an error: {result.is_error}); only "
                           "forwarded calls are measured")  # fmt: skip


class NotForwarded(Exception):
    """A call answered otherwise than the echo answers it."""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100 calls each way")
    parser.add_argument("--calls", type=int, default=1000, help="calls each way (default 1,000)")
    given = parser.parse_args()
    calls = 100 if given.quick else given.calls
    home = Path(tempfile.mkdtemp(prefix="groundstate-bench-mcp-"))
    (home / "groundstate.toml").write_text(f'[mcp.servers.echo]\ncommand = ["{sys.executable}", "{ECHO}"]\n')
    direct = StdioServerParameters(command=sys.executable, args=[ECHO])
    environment = {"GROUNDSTATE_HOME": str(home), "GROUNDSTATE_CONFIG": str(home / "groundstate.toml"),
                   "PATH": os.environ.get("PATH", ""),  # named, not found: a found file is only data until trusted
                   "PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # an older commit's src/, for an A/B run
    guarded = StdioServerParameters(command=sys.executable, args=["-m", "groundstate", "mcp", "serve"], cwd=str(home),
                                    env=environment)  # fmt: skip
    print(f"# {platform.python_version()}, {os.cpu_count()} cores, {calls} calls each", flush=True)
    try:
        paths = {"direct": (direct, "echo"), "through the guard": (guarded, "echo__echo")}
        measured, cpu = asyncio.run(latencies(paths, calls))
    except* NotForwarded as group:  # (the SDK's task groups wrap it, a group in a group)
        found: BaseException = group
        while isinstance(found, BaseExceptionGroup):
            found = found.exceptions[0]
        raise SystemExit(f"bench/mcp: {found}") from None
    rows = [(name, percentile(values, 0.5), percentile(values, 0.99), statistics.mean(values))
            for name, values in measured.items()]  # fmt: skip
    print("| path | p50 ms | p99 ms | mean ms |\n|---|---|---|---|")
    for name, p50, p99, mean in rows:
        print(f"| {name} | {p50:.2f} | {p99:.2f} | {mean:.2f} |")
    added50, added99 = rows[1][1] - rows[0][1], rows[1][2] - rows[0][2]
    print(f"\nadded by the guard: p50 {added50:.2f} ms, p99 {added99:.2f} ms")
    print("CPU per call: " + ", ".join(f"{role} {seconds * 1000 / calls:.3f} ms" for role, seconds in cpu.items()))


if __name__ == "__main__":
    main()
