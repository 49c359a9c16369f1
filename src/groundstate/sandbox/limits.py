"""What one sandboxed program may consume, and the rlimits that enforce it in the child before exec."""

from __future__ import annotations

import resource
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed program: time, memory, CPU, file size, processes, output."""

    timeout_s: float = 60.0  # wall clock: at the deadline the whole process tree is killed
    memory_mb: int = 512  # address space per process (RLIMIT_AS)
    cpu_s: int | None = None  # CPU seconds per process (RLIMIT_CPU); None: the timeout, rounded up
    file_size_mb: int = 64  # the largest file any process may write (RLIMIT_FSIZE), output files included
    processes: int = 64  # processes and threads alive at once (a pids cgroup, or RLIMIT_NPROC)
    output_chars: int = 65_536  # stdout and stderr kept for the caller, each
    total_memory_mb: int | None = None  # all processes together (a memory cgroup); each process is capped at it too
    written_mb: int = 256  # what one program may add to the workspace, all files together (watched; then killed)
    workspace_mb: int = 2048  # the workspace's whole size: a program does not start past it, and is killed reaching it
    tmp_mb: int = 64  # the private /tmp (a tmpfs: memory) of one program
    open_files: int = 256  # descriptors per process (RLIMIT_NOFILE): also bounds files deleted while held open


def apply_rlimits(limits: Limits, *, nproc: bool) -> None:
    """Runs in the child between fork and exec; bubblewrap and everything it starts inherit the limits."""
    memory = min(limits.memory_mb, limits.total_memory_mb or limits.memory_mb) * 1024 * 1024
    cpu = limits.cpu_s if limits.cpu_s is not None else int(limits.timeout_s) + 1
    size = limits.file_size_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    if nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
