"""Cgroups per sandboxed run: a hard cap on processes, on the memory of the whole process tree, and a way to kill
every one of them.

``RLIMIT_NPROC`` is not enforced for root (nor for anyone with CAP_SYS_RESOURCE), and it counts all of a user's
processes, not the sandbox's. Where this process may create a cgroup in a pids hierarchy (cgroup v1 ``pids`` or
a cgroup v2 tree with the pids controller delegated), each run gets its own with ``pids.max`` set, and at the end
every process still in it is killed before it is removed. Elsewhere the caller falls back to RLIMIT_NPROC.

``RLIMIT_AS`` bounds each process, not a tree of them: where a cgroup v1 ``memory`` hierarchy is writable, a run with
a total memory limit also gets a memory cgroup with ``memory.limit_in_bytes`` (and the swap limit, where the kernel
has one), so the processes of one program together cannot pass it. Elsewhere each process's address space is
capped at the total (the caller's rlimits), which is all that can be enforced there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from pathlib import Path


def _pids_root() -> Path | None:
    """A directory where a child pids cgroup can be made, or None."""
    mount = _v1_mount("pids")
    if mount is not None:
        return mount
    for line in _read(Path("/proc/mounts")).splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "cgroup2":
            own = _own_v2_path()
            base = Path(parts[1]) / own.lstrip("/") if own is not None else None
            if base is not None and "pids" in _read(base / "cgroup.subtree_control").split():
                return base
    return None


def _v1_mount(controller: str) -> Path | None:
    """The mount point of ``controller``'s cgroup v1 hierarchy, or None."""
    for line in _read(Path("/proc/mounts")).splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "cgroup" and controller in parts[3].split(","):
            return Path(parts[1])
    return None


def _v1_own(controller: str, mount: Path) -> Path:
    """This process's own cgroup in ``controller``'s v1 hierarchy mounted at ``mount``."""
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        fields = line.split(":", 2)
        if len(fields) == 3 and controller in fields[1].split(","):
            return mount / fields[2].lstrip("/")
    return mount


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


class _Cgroup:
    """A cgroup made for one program: its processes join it before exec, and all of them die at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.procs = str(path / "cgroup.procs")

    @classmethod
    def _made(cls, root: Path, settings: dict[str, str]) -> _Cgroup | None:
        """A new child of ``root`` with ``settings`` written (file -> value), or None where that is not allowed."""
        path = root / f"groundstate-{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
            for name, value in settings.items():
                (path / name).write_text(value, encoding="utf-8")
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


class PidsCgroup(_Cgroup):
    """``create`` returns None where no pids cgroup can be made (then RLIMIT_NPROC is the fallback)."""

    @classmethod
    def create(cls, max_processes: int) -> _Cgroup | None:
        """A pids cgroup allowing ``max_processes`` processes and threads at once, or None."""
        root = _pids_root()
        return None if root is None else cls._made(root, {"pids.max": str(max_processes)})


class MemoryCgroup(_Cgroup):
    """``create`` returns None where no memory cgroup can be made (then each process's RLIMIT_AS is the bound)."""

    @classmethod
    def create(cls, limit_mb: int) -> _Cgroup | None:
        """A v1 memory cgroup whose processes together may use ``limit_mb`` (swap included, where limited), or None."""
        mount = _v1_mount("memory")
        if mount is None:
            return None
        limit = str(limit_mb * 1024 * 1024)
        settings = {"memory.limit_in_bytes": limit}
        if (mount / "memory.memsw.limit_in_bytes").exists():
            settings["memory.memsw.limit_in_bytes"] = limit  # swap may not carry the tree past the limit
        return cls._made(_v1_own("memory", mount), settings) or cls._made(mount, settings)
