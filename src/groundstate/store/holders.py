"""Who holds a journaled call, and whether that process still lives.

An intent without a result means "in doubt" only when the process that wrote it is gone: while it lives, the call is
in flight, and an identical call from another client (or another guard on the same store) is simply another call.
A holder names its process as ``host:pid:start`` — the start time the kernel gives the process, so that a process
id the system reused for something else is not taken for the holder still running. Liveness can be told only on the
same host; a holder on another host, or one written before holders carried their start time, counts as gone (the
call stays in doubt: an operator decides, nothing is repeated unasked).
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path


def _start_of(pid: int) -> str | None:
    """The running process's start time in clock ticks since boot (Linux, ``/proc/PID/stat`` field 22), or None — also
    for a process that has exited and waits to be reaped (a zombie: it runs nothing any more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces and parentheses
    if len(fields) <= 19 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def this_process() -> str:
    """This process as a holder: ``host:pid:start`` (a forked child is a process of its own)."""
    return _described(os.getpid())


def parent_process() -> str:
    """The process that started this one, as a holder (``host:pid:start``): an MCP client that started the guard
    over stdio."""
    return _described(os.getppid())


@functools.cache
def _described(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:{_start_of(pid) or '?'}"


def alive(holder: str) -> bool:
    """Whether ``holder`` is a process that still runs on this host (False when that cannot be told)."""
    if holder == this_process():
        return True
    host, _, rest = holder.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit() or not start or start == "?":
        return False
    return _start_of(int(pid)) == start


def gone_here(holder: str) -> bool:
    """Whether ``holder`` (``host:pid:start``, optionally followed by ``:more``) is certainly gone: it names this
    host and a start time, and no process with that pid and start time runs. False whenever that cannot be told (another
    host, an older holder without its start time) — then only its lease's expiry says it is gone."""
    host, _, rest = holder.partition(":")
    pid, _, tail = rest.partition(":")
    start = tail.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or not start or start == "?":
        return False
    return _start_of(int(pid)) != start


__all__ = ["alive", "gone_here", "parent_process", "this_process"]
