"""OS isolation for every program groundstate runs on a model's behalf (tests, builds, git, model-written code).

Bubblewrap namespaces, rlimits, a pids cgroup and a memory cgroup; no sandbox means a clear refusal, never a
silent fallback.
"""

from .cgroup import MemoryCgroup
from .errors import SandboxError, SandboxUnavailable
from .limits import Limits
from .runner import INSTALL_HINT, UNCONFINED_ENV, UNCONFINED_VALUE, Completed, Sandbox, default_sandbox

__all__ = [
    "INSTALL_HINT",
    "UNCONFINED_ENV",
    "UNCONFINED_VALUE",
    "Completed",
    "Limits",
    "MemoryCgroup",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "default_sandbox",
]
