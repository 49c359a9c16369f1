"""The bubblewrap command line for one sandboxed program.

Inside: the workspace read-write at ``/workspace`` (its ``.git`` read-only unless the program is git itself),
``/usr`` and the interpreter read-only, a private ``/tmp``, ``/dev`` with only the harmless devices, a ``/proc``
of the sandbox's own PID namespace, and nothing else of the host: no home directory, no ``$GROUNDSTATE_HOME``,
no ``/etc`` beyond the loader cache and time zone. Namespaces: user (nested ones disabled), PID, network (no
interfaces but loopback), IPC, UTS, cgroup. All capabilities are dropped; the environment is cleared.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

INSIDE_WORKSPACE = "/workspace"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_HARMLESS_ETC = ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives")


def interpreter_roots() -> list[str]:
    """The directories the running Python needs (its installation and its virtual environment), outside /usr."""
    roots: list[str] = []
    for prefix in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))):
        real = os.path.realpath(prefix)
        if real.startswith("/usr/") or real == "/usr" or real in roots:
            continue
        if any(real.startswith(r + os.sep) for r in roots):
            continue
        roots.append(real)
        if prefix != real and prefix not in roots:
            roots.append(prefix)  # the path by which the interpreter is named, if it differs
    return roots


def command(
    argv: Sequence[str],
    workspace: Path,
    *,
    writable_git: bool = False,
    env: Mapping[str, str] | None = None,
    read_only: Sequence[Path] = (),
    tmp_bytes: int = 64 << 20,
) -> list[str]:
    """The bwrap command line; ``read_only``: further host directories the program may read (a Python tool's module
    and the groundstate package it imports), bound read-only at the same path."""
    args = ["bwrap", "--unshare-user", "--unshare-all", "--disable-userns", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--clearenv"]  # fmt: skip
    for name, value in _environment(env).items():
        args += ["--setenv", name, value]
    # first: later binds go on top of them (a virtual environment under /tmp stays visible); /tmp is memory: sized
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    for directory in _SYSTEM_DIRS:
        if os.path.islink(directory):
            args += ["--symlink", os.readlink(directory), directory]
        elif os.path.isdir(directory):
            args += ["--ro-bind", directory, directory]
    for path in _HARMLESS_ETC:
        args += ["--ro-bind-try", path, path]
    for root in interpreter_roots():
        args += ["--ro-bind", root, root]
    for readable in read_only:
        args += ["--ro-bind", str(readable), str(readable)]
    args += ["--bind", str(workspace), INSIDE_WORKSPACE]
    git_dir = workspace / ".git"
    if not writable_git and git_dir.is_dir() and not git_dir.is_symlink():
        args += ["--ro-bind", str(git_dir), f"{INSIDE_WORKSPACE}/.git"]
    args += ["--chdir", INSIDE_WORKSPACE, "--", *argv]
    return args


def _environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    venv_bin = os.path.dirname(sys.executable)
    env = {
        "PATH": os.pathsep.join(dict.fromkeys([venv_bin, "/usr/local/bin", "/usr/bin", "/bin"])),
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }
    env.update(extra or {})
    return env
