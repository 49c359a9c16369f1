"""Journal holders for tests: the name of a process that ran and is gone, as a driver or a guard killed mid-call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from groundstate.store import this_process


def gone() -> str:
    """``host:pid:start`` of a process that ran here and was killed."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    start = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    process.kill()
    process.wait()
    return f"{this_process().split(':')[0]}:{process.pid}:{start}"
