"""Executors that run programs: tests, the build, git, and model-written Python in a sandbox.

Every child runs in the workspace with a timeout, a memory limit (RLIMIT_AS), a CPU-time limit, a minimal
environment and bounded output. Model-written Python additionally runs isolated (``-I``) under an audit hook
that refuses sockets, new processes, native libraries and writes outside the workspace; where the OS allows
unprivileged user namespaces it also runs in a network namespace with no interfaces (``unshare -rn``).
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .base import Action, Context, ExecutorError, Outcome

MAX_CODE_CHARS = 100_000
_SAFE_ENV = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")

# Runs before the model's code; an audit hook cannot be removed once installed.
_BOOTSTRAP = r"""
import os, sys
_root = os.path.realpath(sys.argv[1])
_blocked = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
            "os.forkpty", "pty.", "ctypes.", "_ctypes.", "os.kill", "signal.pthread_kill")
def _guard(event, args):
    if event.startswith(_blocked):
        raise PermissionError(f"{event} is not allowed in the sandbox")
    if event == "open" and args[0] is not None and not isinstance(args[0], int):
        mode, flags = args[1] or "r", args[2] or 0
        writing = any(c in str(mode) for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        if writing:
            path = os.path.realpath(os.fsdecode(args[0]))
            if path != _root and not path.startswith(_root + os.sep):
                raise PermissionError(f"writing {path} outside the workspace is not allowed")
sys.addaudithook(_guard)
del _guard
_code = sys.stdin.read()
sys.argv = ["<model code>"]
exec(compile(_code, "<model code>", "exec"), {"__name__": "__main__"})
"""


def run_tests(action: Action, context: Context) -> Outcome:
    target = (
        [context.workspace.relative(context.workspace.resolve(action.target, must_exist=True))]
        if (action.target and action.target != "codebase")
        else []
    )
    return _run([*context.test_command, *target], context)


def build_project(action: Action, context: Context) -> Outcome:
    return _run(list(context.build_command), context)


def execute_python(action: Action, context: Context) -> Outcome:
    code = action.text_field("code") if action.payload.strip().startswith("{") else action.payload
    if not code.strip():
        raise ExecutorError("execute_python needs code in its payload")
    if len(code) > MAX_CODE_CHARS:
        raise ExecutorError(f"the code has {len(code)} characters; at most {MAX_CODE_CHARS} are run")
    command = [sys.executable, "-I", "-c", _BOOTSTRAP, str(context.workspace.root)]
    if _network_namespace_available():
        command = ["unshare", "-rn", *command]
    return _run(command, context, stdin=code)


def git(arguments: Sequence[str], context: Context) -> Outcome:
    if shutil.which("git") is None:
        raise ExecutorError("git is not installed")
    identity = ["-c", "user.name=groundstate", "-c", "user.email=groundstate@localhost"]
    return _run(["git", "-c", "core.pager=cat", *identity, *arguments], context)


def _run(command: list[str], context: Context, stdin: str | None = None) -> Outcome:
    env = {k: v for k, v in os.environ.items() if k in _SAFE_ENV}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    limits = functools.partial(_limit, context.memory_mb, context.timeout_s)
    try:
        done = subprocess.run(
            command,
            cwd=context.workspace.root,
            input=stdin,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=context.timeout_s,
            env=env,
            preexec_fn=limits,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ExecutorError(f"{Path(command[0]).name} did not finish within {context.timeout_s:g} s") from None
    except OSError as exc:
        raise ExecutorError(f"cannot run {command[0]}: {exc.strerror}") from None
    output = done.stdout + (("\n" if done.stdout else "") + done.stderr if done.stderr else "")
    status = "" if done.returncode == 0 else f"\n[exit status {done.returncode}]"
    return Outcome(done.returncode == 0, context.bounded(output + status))


def _limit(memory_mb: int, timeout_s: float) -> None:  # runs in the child, before exec
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    os.setsid()


@functools.cache
def _network_namespace_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=5, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
