"""Trusting a test's working-directory ``groundstate.toml`` the way an operator does (``groundstate config trust``):
since a file found implicitly is ignored until trusted, tests that rely on finding it trust it first."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def trusted(path: Path, env: Mapping[str, str] | None = None) -> Path:
    """Trust ``path`` in the state directory ``env`` names (this process's environment by default); returns it."""
    done = subprocess.run([sys.executable, "-m", "groundstate", "config", "trust", str(path)], capture_output=True,
                          text=True, timeout=60, env=dict(env if env is not None else os.environ))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return path
