"""A pids cgroup per sandboxed run: a hard cap on processes and a way to kill every one of them.

``RLIMIT_NPROC`` is not enforced for root (nor for anyone with CAP_SYS_RESOURCE), and it counts all of a user's
processes, not the sandbox's. Where this process may create a cgroup in a pids hierarchy (cgroup v1 ``pids`` or
a cgroup v2 tree with the pids controller delegated), each run gets its own with ``pids.max`` set, and at the end
every process still in it is killed before it is removed. Elsewhere the caller falls back to RLIMIT_NPROC.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from pathlib import Path


def _pids_root() -> Path | None:
    """A directory where a child pids cgroup can be made, or None."""
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in mounts:
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "cgroup" and "pids" in parts[3].split(","):
            return Path(parts[1])
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "cgroup2":
            own = _own_v2_path()
            base = Path(parts[1]) / own.lstrip("/") if own is not None else None
            if base is not None and "pids" in _read(base / "cgroup.subtree_control").split():
                return base
    return None


def _own_v2_path() -> str | None:
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


class PidsCgroup:
    """``create`` returns None where no pids cgroup can be made (then RLIMIT_NPROC is the fallback)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.procs = str(path / "cgroup.procs")

    @classmethod
    def create(cls, max_processes: int) -> PidsCgroup | None:
        root = _pids_root()
        if root is None:
            return None
        path = root / f"groundstate-{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_processes), encoding="utf-8")
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def join(self) -> None:
        """Runs in the child before exec: it and everything it starts are counted here."""
        fd = os.open(self.procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)

    def kill_all(self) -> None:
        """SIGKILL every process still in the cgroup (a forked daemon included), then remove the cgroup."""
        for _ in range(50):
            pids = [int(p) for p in _read(Path(self.procs)).split()]
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            os.sched_yield()
        for _ in range(200):
            try:
                self.path.rmdir()
                return
            except OSError:
                os.sched_yield()
