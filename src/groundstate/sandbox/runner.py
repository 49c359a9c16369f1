"""Running one program on a model's behalf: in bubblewrap, or refused.

``Sandbox.run`` starts the program in its own session (and, where possible, its own pids cgroup and, with a total
memory limit, its own memory cgroup) with rlimits,
writes its output to size-limited files rather than pipes (a program printing gigabytes fills nothing but a
bounded file), kills the whole process tree at the deadline, and always returns a ``Completed`` — never raises
for anything the program does.

There is no silent fallback: if bubblewrap is missing or cannot create namespaces, ``default_sandbox`` raises
``SandboxUnavailable`` naming what to install. Running unconfined takes the environment variable
``GROUNDSTATE_UNSAFE_NO_SANDBOX=i-understand`` and every result then says so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import bubblewrap
from .cgroup import MemoryCgroup, PidsCgroup, _Cgroup
from .errors import SandboxError, SandboxUnavailable
from .limits import Limits, apply_rlimits
from .watch import WriteWatch, disk_usage

UNCONFINED_ENV = "GROUNDSTATE_UNSAFE_NO_SANDBOX"
UNCONFINED_VALUE = "i-understand"
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"


@dataclass(frozen=True)
class Completed:
    """How a sandboxed program ended: exit code, output, whether it timed out, whether it was confined."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    confined: bool = True
    stopped: str | None = None  # why it was stopped before its end other than time (a write limit), or None

    @property
    def ok(self) -> bool:
        """Exited 0 within its time and its limits."""
        return self.returncode == 0 and not self.timed_out and self.stopped is None


class Sandbox:
    """Runs programs under bubblewrap (``confined=True``) or, only when explicitly switched, unconfined."""

    def __init__(self, *, confined: bool = True) -> None:
        self.confined = confined
        self.mechanism = "bubblewrap" if confined else "none (GROUNDSTATE_UNSAFE_NO_SANDBOX)"

    def run(
        self,
        argv: Sequence[str],
        workspace: Path,
        limits: Limits,
        *,
        stdin: str | None = None,
        writable_git: bool = False,
        env: Mapping[str, str] | None = None,
        read_only: Sequence[Path] = (),
    ) -> Completed:
        """Run ``argv`` confined to ``workspace`` under ``limits``; the whole process tree is gone when this returns.
        ``read_only``: host directories the program may also read (nothing else of the host is visible)."""
        if not argv:
            raise SandboxError("nothing to run")
        workspace = Path(workspace).resolve(strict=True)
        before = disk_usage(workspace)
        if before >= limits.workspace_mb << 20:
            return Completed(-1, "", "", confined=self.confined, stopped=f"not started: the workspace already holds "
                             f"{before >> 20} MB (at most {limits.workspace_mb} MB)")  # fmt: skip
        if self.confined:
            full = bubblewrap.command(argv, workspace, writable_git=writable_git, env=env, read_only=read_only,
                                      tmp_bytes=limits.tmp_mb << 20)  # fmt: skip
            cwd = "/"
        else:
            full, cwd = list(argv), str(workspace)
        cgroup = PidsCgroup.create(limits.processes)
        memory = MemoryCgroup.create(limits.total_memory_mb) if limits.total_memory_mb is not None else None
        groups = [g for g in (cgroup, memory) if g is not None]
        with tempfile.TemporaryDirectory(prefix="groundstate-sandbox-") as scratch:
            out_path, err_path = Path(scratch, "stdout"), Path(scratch, "stderr")
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                try:
                    process = subprocess.Popen(
                        full,
                        cwd=cwd,
                        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        env=_host_env(env) if not self.confined else {"PATH": os.environ.get("PATH", "/usr/bin")},
                        preexec_fn=functools.partial(_child_setup, limits, groups, nproc=cgroup is None),
                        start_new_session=True,
                    )
                except OSError as exc:
                    for group in groups:
                        group.kill_all()
                    raise SandboxError(f"cannot start {full[0]}: {exc.strerror}") from None
                watch = WriteWatch(workspace, before, limits, lambda: _kill_tree(process, groups, wait=False))
                try:
                    timed_out = _wait(process, stdin, limits.timeout_s)
                finally:
                    watch.stop()
                _kill_tree(process, groups)
            stdout = _read_bounded(out_path, limits.output_chars)
            stderr = _read_bounded(err_path, limits.output_chars)
        if not self.confined:
            stderr = "[groundstate: this program ran WITHOUT a sandbox (GROUNDSTATE_UNSAFE_NO_SANDBOX)]\n" + stderr
        code = process.returncode if process.returncode is not None else -signal.SIGKILL
        return Completed(code, stdout, stderr, timed_out, self.confined, watch.exceeded)


def _child_setup(limits: Limits, groups: list[_Cgroup], *, nproc: bool) -> None:  # between fork and exec
    for group in groups:
        group.join()
    apply_rlimits(limits, nproc=nproc and os.geteuid() != 0)


def _wait(process: subprocess.Popen[bytes], stdin: str | None, timeout_s: float) -> bool:
    try:
        if stdin is not None and process.stdin is not None:
            process.communicate(stdin.encode("utf-8", "surrogatepass"), timeout=timeout_s)
        else:
            process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return True
    except BrokenPipeError:  # the program did not read its input: not our problem
        process.wait(timeout=timeout_s)
    return False


def _kill_tree(process: subprocess.Popen[bytes], groups: list[_Cgroup], *, wait: bool = True) -> None:
    """Whatever is left of the session (or its cgroups) dies: a program's forked children never outlive it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    for group in groups:
        group.kill_all()
    if wait:
        process.wait()


def _read_bounded(path: Path, limit: int) -> str:
    with open(path, "rb") as handle:
        data = handle.read(limit * 4 + 4)
        size = os.fstat(handle.fileno()).st_size
    text = data.decode("utf-8", "replace")
    if len(text) > limit or size > len(data):
        return text[:limit] + f"\n[output cut at {limit} characters]"
    return text


def _host_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "VIRTUAL_ENV")}
    keep.update({"HOME": tempfile.gettempdir(), "PYTHONDONTWRITEBYTECODE": "1", **(extra or {})})
    return keep


@functools.cache
def _bubblewrap_works() -> str | None:
    """None if bubblewrap can create its namespaces here, else why not."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    with tempfile.TemporaryDirectory() as probe:
        try:
            done = subprocess.run(
                bubblewrap.command(["true"], Path(probe)), capture_output=True, timeout=20, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap did not run: {exc}"
    if done.returncode != 0:
        return "bubblewrap cannot create its namespaces here: " + done.stderr.decode("utf-8", "replace").strip()
    return None


def default_sandbox() -> Sandbox:
    """The sandbox every executor uses: bubblewrap, unconfined only by the explicit switch, else a refusal."""
    if os.environ.get(UNCONFINED_ENV) == UNCONFINED_VALUE:
        return Sandbox(confined=False)
    problem = _bubblewrap_works()
    if problem is not None:
        raise SandboxUnavailable(
            f"refusing to run a program for the model without a sandbox: {problem}; {INSTALL_HINT} "
            f"(or, knowing the risk, set {UNCONFINED_ENV}={UNCONFINED_VALUE})"
        )
    return Sandbox()
