"""Watching what a sandboxed program writes to the workspace, since no rlimit bounds it.

``RLIMIT_FSIZE`` caps each file, not their number: one ``execute_python`` call could write ten 60 MB files, or a
thousand. A thread measures the workspace's allocated size every ``INTERVAL_S`` while the program runs and kills the
whole process tree when it has grown by more than ``Limits.written_mb`` or reached ``Limits.workspace_mb``. The
bound is what was allocated between two looks: the overshoot is at most what the program writes in one interval
(tens of MB on fast disks), which docs/security.md states. What it cannot see is a file the program deleted while
holding it open: ``RLIMIT_NOFILE`` (256) and ``RLIMIT_FSIZE`` bound that, for the program's lifetime only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from .limits import Limits

INTERVAL_S = 0.05
ENTRY_BYTES = 4096  # what one entry (an inode) counts for, whatever its blocks: 1,000 empty files weigh 4 MB


def disk_usage(root: Path) -> int:
    """Bytes allocated under ``root`` to every entry — files, directories, symbolic links (a long link target takes
    a block) — plus ``ENTRY_BYTES`` for each entry, so that many empty files or links (inodes) count too. Holes are
    not counted; links are not followed."""
    total = 0
    pending = [str(root)]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:  # gone or unreadable meanwhile: the program's own doing
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    total += entry.stat(follow_symlinks=False).st_blocks * 512 + ENTRY_BYTES
                except OSError:
                    continue
    return total


class WriteWatch:
    """A thread that calls ``kill`` once the workspace grows past the limits; ``exceeded`` says why, or None."""

    def __init__(self, workspace: Path, before: int, limits: Limits, kill: Callable[[], None]) -> None:
        self.workspace, self.kill = workspace, kill
        self.budget = min(before + (limits.written_mb << 20), limits.workspace_mb << 20)
        self.limits = limits
        self.exceeded: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="groundstate-write-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(INTERVAL_S):
            if disk_usage(self.workspace) > self.budget:
                self.exceeded = (f"killed: it wrote more than the workspace allows (at most {self.limits.written_mb} "
                                 f"MB per program, {self.limits.workspace_mb} MB in all)")  # fmt: skip
                self.kill()
                return

    def stop(self) -> None:
        """Stop watching (the program ended); one last look decides whether it went over at the end."""
        self._done.set()
        self._thread.join()
        if self.exceeded is None and disk_usage(self.workspace) > self.budget:
            self.exceeded = (f"it wrote more than the workspace allows (at most {self.limits.written_mb} MB per "
                             f"program, {self.limits.workspace_mb} MB in all)")  # fmt: skip
