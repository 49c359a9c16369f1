"""Stdio MCP servers stopped with the process that started them, however it is stopped.

The SDK starts each stdio server in a session of its own (so stopping the server stops its whole tree) and stops it
when its client unwinds. A process told to terminate (SIGTERM: what an MCP client sends a server that does not exit
in time, what a service manager sends) does not unwind — Python's default is to die at once — and a server in its own
session outlives it: one that ignores its closed stdin runs on, orphaned. ``stopped_with_us`` installs a SIGTERM
handler that first stops every child leading its own process group (the servers, and their children with them), then
terminates as the signal would have (SIGHUP too: the terminal it ran in closed).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType

from .keeper import (
    EXITED,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_PDEATHSIG,
    Table,
    descendants,
    prctl,
    stop_tree,
)
from .keeper import processes as _processes
from .keeper import stat as _stat

STOPPING = (signal.SIGTERM, signal.SIGHUP)  # a service manager's stop, a closed terminal: servers stopped first
PR_SET_DUMPABLE = 4
_adopting = False  # this process adopts its descendants' orphans (adopting_orphans): they are stopped with it
# the children this process already had when it began to watch over its own (pid -> start time): a process the user
# started before exec-ing into groundstate (``sidecar & exec groundstate serve``) is theirs, never stopped with ours
_inherited: dict[int, int] | None = None
GRACE_SEC = 0.5  # a server's time to leave on SIGTERM before it is killed: the client that sent ours waits ~2 s
# an HTTP server's (the gateway, the console, the guard's HTTP transport), once stopped: the time its open requests
# get to finish before they are closed — a client that never finishes its request, or a stream that never ends,
# would otherwise hold the shutdown for as long as it liked
SHUTDOWN_GRACE_SEC = 10


def unreadable_by_peers() -> bool:
    """Make this process undumpable (Linux ``PR_SET_DUMPABLE`` 0): its ``/proc`` entries — the environment with the
    provider key, the open descriptors (the MCP client's pipe, the store) — become the superuser's, and no process of
    the same user may attach to it or read its memory. An MCP server or a tool started by it runs as the same user:
    without this it could read ``GROUNDSTATE_API_KEY`` from ``/proc/PPID/environ`` or write forged answers into the
    client's pipe through ``/proc/PPID/fd``. Its children start dumpable again (``execve`` resets it). False where
    the call does not exist (not Linux)."""
    return prctl(PR_SET_DUMPABLE, 0)


def killed_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for a server's process: the kernel SIGKILLs it when the thread that started it ends (Linux
    ``PR_SET_PDEATHSIG``), so a server outlives no process that started it — even one killed outright (SIGKILL, the
    out-of-memory killer), which stops nothing on its way out. If that process ended before the child could ask, the
    child leaves at once. None where the call does not exist (not Linux). Start servers from a thread that lives as
    long as they do (an event loop's): the signal follows the thread, not the process."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def in_the_child() -> None:  # between fork and exec: no allocation-heavy Python, no locks
        if prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0 or os.getppid() != parent:
            os._exit(127)

    return in_the_child


@contextlib.contextmanager
def adopting_orphans() -> Iterator[bool]:
    """While the block runs, a process that a server started and then left — a daemon that forked twice, whose
    parent exited — becomes this process's child (Linux ``PR_SET_CHILD_SUBREAPER``) instead of init's, out of the
    reach of every server's stopping; when the block ends (or a SIGTERM ends this process: ``stopped_with_us``)
    every process still below this one is stopped (``stop_descendants``). Meanwhile those that exit are reaped once
    they have been zombies for a scan (``ZOMBIE_SCAN_SEC``), so a server that leaves short-lived daemons cannot fill
    the process table. Yields whether the call exists here. Only for a command whose own descendants are all its
    servers' (the MCP guard, the commands that drive runs: ``cli.ADOPTING``), in its main thread: nothing it starts
    may outlive it; what it inherited (``_inherited``) is left alone."""
    global _adopting
    if _adopting:  # inside another such block (the command's, around the guard's own): that one stops them
        yield True
        return
    note_inherited()
    adopted = prctl(PR_SET_CHILD_SUBREAPER, 1)
    _adopting = adopted
    reaping = threading.Event()
    reaper = threading.Thread(target=_reap_adopted, args=(reaping,), name="groundstate-reaper", daemon=True)
    if adopted:
        reaper.start()
    try:
        yield adopted
    finally:
        reaping.set()
        if adopted:
            with _signals_deferred():  # a second Ctrl+C, the client's SIGTERM: after this pass, not in its middle
                stop_descendants()
                _adopting = False
                prctl(PR_SET_CHILD_SUBREAPER, 0)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP noted while the block runs and raised again once it has (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    numbers = (signal.SIGINT, *STOPPING)
    before = {number: signal.signal(number, lambda signum, _frame: noted.append(signum)) for number in numbers}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
        for signum in dict.fromkeys(noted):
            os.kill(os.getpid(), signum)


def note_inherited() -> None:
    """Remember, once per process, the children it has before it starts any (see ``_inherited``)."""
    global _inherited
    if _inherited is None:
        _inherited = identified(_children())


def _children() -> list[int]:
    """This process's children now: from ``/proc/self/task/*/children`` (one small read per thread), else from the
    process table."""
    try:
        return [int(pid) for task in Path("/proc/self/task").iterdir()
                for pid in (task / "children").read_text().split()]  # fmt: skip
    except OSError:
        return [pid for pid, (parent, *_) in _processes().items() if parent == os.getpid()]


def ours(processes: Table | None = None) -> list[int]:
    """The pids below this process but for the trees of the children it inherited (``_inherited``, each while it is
    still the process seen then)."""
    table = _processes() if processes is None else processes
    spared = [pid for pid, started in (_inherited or {}).items() if pid in table and start_time(pid) == started]
    return descendants(os.getpid(), table, spared)


def stop_descendants(grace: float = GRACE_SEC) -> None:
    """SIGTERM every process below this one (``ours``), give them ``grace`` seconds, then SIGKILL what is below it
    until several looks in a row find nothing, not even one that just exited (``keeper.stop_tree``: a process that
    forks while it is stopped is caught, with its group where nothing outside can be in it)."""
    first_seen: dict[int, float] = {}

    def reap() -> bool:
        # reaped once it has stayed a zombie a while: a child someone waits for (asyncio's watcher, ``subprocess``)
        # is reaped by them at once, and taking it from them makes them report a status they never saw
        zombies, now = _zombie_children(), time.monotonic()
        _reap(pid for pid in zombies if now - first_seen.setdefault(pid, now) >= LINGERING_ZOMBIE_SEC)
        return bool(zombies)

    stop_tree(ours, reap, grace)


LINGERING_ZOMBIE_SEC = 0.05
ZOMBIE_SCAN_SEC = 2.0  # an adopted process that exited is reaped once seen a zombie in two scans this far apart


def _reap_adopted(stopping: threading.Event) -> None:
    """Reap this process's children that have stayed zombies for a whole scan: the adopted ones that exited. A child
    this process started itself is reaped by whoever started it, at once (asyncio's watcher, ``subprocess``)."""
    zombies: set[int] = set()
    while not stopping.wait(ZOMBIE_SCAN_SEC):
        now = set(_zombie_children())
        _reap(now & zombies)
        zombies = now - zombies


def _reap(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _zombie_children() -> list[int]:
    """This process's children that have exited and wait to be reaped."""
    me = os.getpid()
    return [pid for pid, (parent, *_) in _processes().items() if parent == me and _exited(pid)]


def _exited(pid: int) -> bool:
    """Whether ``pid`` is no longer running: a zombie, dead, or gone."""
    fields = _stat(pid)
    return fields is None or fields[0] in EXITED


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, /proc's ``starttime``): with the pid, who the process is — a
    pid alone may be another process's by the time it is signalled. None: no such process."""
    fields = _stat(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def identified(pids: list[int]) -> dict[int, int]:
    """``pids`` with their start times (those gone already left out)."""
    found = {pid: start_time(pid) for pid in pids}
    return {pid: started for pid, started in found.items() if started is not None}


def group_leading_children(parent: int | None = None) -> list[int]:
    """The pids of the processes below ``parent`` (default: this process) that lead their own process group — each
    server the SDK started in a session of its own, and any of their descendants that left for a session of its own
    (``setsid``: a server's child that its group's signal would miss)."""
    table = _processes()
    below = ours(table) if parent is None else descendants(parent, table)
    return [pid for pid in below if table[pid][1] == pid]


def stop_groups(leaders: list[int], grace: float = GRACE_SEC) -> None:
    """SIGTERM each process group, give them ``grace`` seconds, then SIGKILL the groups still there."""
    for leader in leaders:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGTERM)
    deadline = time.monotonic() + grace
    remaining = list(leaders)
    while remaining and time.monotonic() < deadline:
        time.sleep(0.02)
        remaining = [leader for leader in remaining if _group_alive(leader)]
    for leader in remaining:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)


def _group_alive(leader: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(leader, os.WNOHANG)  # a dead leader not yet reaped would keep its group "alive"
    try:
        os.killpg(leader, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def stopped_with_us() -> Iterator[None]:
    """While the block runs, a SIGTERM stops this process's servers before it terminates this process (exit status
    as the signal's own). Only in the main thread — where Python runs signal handlers — else it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    note_inherited()

    def on_term(signum: int, frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_IGN)  # a second SIGTERM while the servers stop waits for them (run
        # nested, it found the leaders already reaped, and terminated before the first could kill their groups)
        stop_groups(group_leading_children())
        if _adopting:  # and what the servers left that this process adopted
            stop_descendants()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # still here: the first process of a PID namespace (a container's), which the
        # kernel spares its own signals

    before = {number: signal.signal(number, on_term) for number in STOPPING}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
