"""What a benchmark reads about the processes it starts: the CPU time their threads have run, and which processes
it started (by their command line), from Linux's ``/proc``. Shared by ``bench/gateway`` and ``bench/mcp``, which
each report a server's CPU per request beside its latency (issue 36 sets targets for both)."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """The CPU time a process's threads have run so far, as the scheduler counts it in nanoseconds (Linux's
    ``schedstat``): ``/proc/PID/stat``'s clock ticks (10 ms) were coarser than what a round of 100 streams costs
    the gateway, and its rows moved by a tick's worth between rounds. Threads that ended are not counted."""
    tasks = Path(f"/proc/{pid}/task")
    return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks.iterdir()) / 1e9


def descendants(pid: int | None = None) -> dict[int, str]:
    """Every process below ``pid`` (this one by default), by its id, with its command line (arguments joined by
    spaces) — how a benchmark finds the servers an SDK started for it without being handed their ids."""
    parents: dict[int, int] = {}
    lines: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])  # after the name: state, then the parent
        lines[int(entry.name)] = command.replace(b"\0", b" ").decode(errors="replace").strip()
    found, frontier = {}, [os.getpid() if pid is None else pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found[child] = lines[child]
                frontier.append(child)
    return found
