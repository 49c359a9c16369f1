"""The OS sandbox itself: what a program inside can see and do, every limit, and the refusal without bubblewrap.

These run real programs under real bubblewrap (CI installs it); nothing here is mocked except, in the refusal test,
the PATH that finds ``bwrap``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from groundstate.sandbox import UNCONFINED_ENV, UNCONFINED_VALUE, Limits, MemoryCgroup, Sandbox, default_sandbox


@pytest.fixture
def sandbox() -> Sandbox:
    return default_sandbox()  # bubblewrap: CI installs it, so this is never the unconfined switch there


def python(sandbox: Sandbox, tmp_path: Path, code: str, **limits: object) -> tuple[int, str, bool]:
    done = sandbox.run(["python", "-I", "-"], tmp_path, Limits(**{"timeout_s": 20, **limits}), stdin=code)  # type: ignore[arg-type]
    return done.returncode, done.stdout + done.stderr, done.timed_out


def test_ci_uses_the_real_sandbox(sandbox: Sandbox) -> None:
    assert sandbox.confined and sandbox.mechanism == "bubblewrap"


def test_only_the_workspace_is_visible_and_writable(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = Path.home() / ".groundstate-sandbox-probe"
    secret.write_text("secret")
    try:
        code = (f"import os\nprint(os.getcwd())\nprint(os.path.exists({str(secret)!r}))\n"
                f"print(os.path.exists({str(tmp_path)!r}))\nopen('inside.txt', 'w').write('ok')\n"
                "print(sorted(os.environ))\n")  # fmt: skip
        code_status, output, _ = python(sandbox, tmp_path, code)
    finally:
        secret.unlink()
    assert code_status == 0, output
    lines = output.splitlines()
    assert lines[0] == "/workspace" and lines[1] == "False" and lines[2] == "False"
    assert "GROUNDSTATE_HOME" not in lines[3] and "HOME" in lines[3]
    assert (tmp_path / "inside.txt").read_text() == "ok"


def test_no_network_and_no_other_processes(sandbox: Sandbox, tmp_path: Path) -> None:
    code = ("import os, socket\n"
            "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
            "socket.create_connection(('1.1.1.1', 53), timeout=2)\n")  # fmt: skip
    status, output, _ = python(sandbox, tmp_path, code)
    pids = eval(output.splitlines()[0])  # our own list of ints
    assert max(pids) < 10  # a PID namespace of its own: the host's processes do not exist here
    assert status != 0 and ("Network is unreachable" in output or "unreachable" in output.lower())


def test_the_git_directory_is_read_only_for_model_code(sandbox: Sandbox, tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    status, output, _ = python(sandbox, tmp_path, "open('.git/config', 'a').write('[core]\\n')")
    assert status != 0 and "Read-only file system" in output


def test_the_timeout_kills_the_whole_process_tree(sandbox: Sandbox, tmp_path: Path) -> None:
    code = ("import os, time\n"
            "if os.fork() == 0:\n    os.setsid()\n    time.sleep(3)\n    open('survived', 'w').write('x')\n"
            "time.sleep(60)\n")  # fmt: skip
    started = time.monotonic()
    _, _, timed_out = python(sandbox, tmp_path, code, timeout_s=1)
    assert timed_out and time.monotonic() - started < 10
    time.sleep(3.5)
    assert not (tmp_path / "survived").exists()


def test_memory_cpu_file_size_and_process_limits(sandbox: Sandbox, tmp_path: Path) -> None:
    status, output, _ = python(sandbox, tmp_path, "x = bytearray(300 * 1024 * 1024)", memory_mb=128)
    assert status != 0 and "MemoryError" in output
    status, output, timed_out = python(sandbox, tmp_path, "while True: pass", cpu_s=1, timeout_s=30)
    assert status != 0 and not timed_out  # killed by the CPU limit (SIGXCPU), long before the wall clock
    status, _, _ = python(sandbox, tmp_path, "open('big', 'wb').write(b'x' * 3 * 1024 * 1024)", file_size_mb=1)
    assert status != 0 and (tmp_path / "big").stat().st_size <= 1024 * 1024
    bomb = ("import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(5)\n"
            "            os._exit(0)\n        n += 1\nexcept OSError:\n    print('refused after', n)\n")  # fmt: skip
    status, output, _ = python(sandbox, tmp_path, bomb, processes=16, timeout_s=20)
    assert "refused after" in output and int(output.split()[-1]) < 16


def test_output_is_bounded(sandbox: Sandbox, tmp_path: Path) -> None:
    _, output, _ = python(sandbox, tmp_path, "print('y' * 1_000_000)", output_chars=1000)
    assert len(output) < 1100 and "[output cut at 1000 characters]" in output


def test_no_sandbox_means_a_refusal_naming_what_to_install(tmp_path: Path) -> None:
    probe = ("from groundstate.sandbox import default_sandbox, SandboxUnavailable\n"
             "try:\n    default_sandbox()\nexcept SandboxUnavailable as exc:\n    print(exc)\n")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != UNCONFINED_ENV}
    env["PATH"] = str(tmp_path)  # no bwrap on this PATH
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert "refusing to run a program for the model without a sandbox" in done.stdout
    assert "apt-get install bubblewrap" in done.stdout and UNCONFINED_ENV in done.stdout


def test_the_unconfined_switch_is_explicit_and_loud(tmp_path: Path) -> None:
    probe = ("from pathlib import Path\nfrom groundstate.sandbox import default_sandbox, Limits\n"
             "s = default_sandbox()\nprint(s.confined)\n"
             "print(s.run(['sh', '-c', 'echo hi'], Path('.'), Limits()).stderr)\n")  # fmt: skip
    for value, confined in ((UNCONFINED_VALUE, "False"), ("1", "True"), ("yes", "True")):
        env = {**os.environ, UNCONFINED_ENV: value}
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=60)  # fmt: skip
        assert done.stdout.splitlines()[0] == confined, done.stderr
        assert ("WITHOUT a sandbox" in done.stdout) == (confined == "False")


def test_the_virtual_store_runs_programs_in_the_sandbox_it_is_given(tmp_path: Path) -> None:
    from groundstate.kernel import Action, ShardProfile, VirtualStore, Workspace

    action = Action("/action/1", "execute_python", "", "print('hi')")
    given = VirtualStore(Workspace(tmp_path), sandbox=Sandbox(confined=False)).run("execute_python", action,
                                                                                   ShardProfile())  # fmt: skip
    assert given.ok and "WITHOUT a sandbox" in given.output  # the given sandbox, not the default bubblewrap
    default = VirtualStore(Workspace(tmp_path)).run("execute_python", action, ShardProfile())
    assert default.ok and "WITHOUT" not in default.output


FORKED_HOGS = """
import os, time
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(80 * 1024 * 1024)  # each child alone stays under the per-process limit
        time.sleep(3)
        os._exit(0)
    children.append(pid)
killed = sum(1 for pid in children if os.waitpid(pid, 0)[1] != 0)
print("killed", killed)
"""


def test_total_memory_bounds_the_whole_process_tree(sandbox: Sandbox, tmp_path: Path) -> None:
    probe = MemoryCgroup.create(64)
    if probe is None:
        pytest.fail("this machine has no writable cgroup v1 memory hierarchy; the tree-wide limit cannot be tested")
    probe.kill_all()  # it held no process: this only removes it
    status, output, _ = python(sandbox, tmp_path, FORKED_HOGS, memory_mb=512, total_memory_mb=200, timeout_s=30)
    assert status == 0 and int(output.split()[-1]) >= 2, output  # 4 x 80 MB do not fit in 200 MB together
    status, output, _ = python(sandbox, tmp_path, FORKED_HOGS, memory_mb=512, timeout_s=30)
    assert output.split()[-2:] == ["killed", "0"], output  # without the total, each child is within its own limit


def test_one_process_is_capped_at_the_total_too(sandbox: Sandbox, tmp_path: Path) -> None:
    status, output, _ = python(sandbox, tmp_path, "x = bytearray(300 * 1024 * 1024)", memory_mb=512,
                               total_memory_mb=200)  # fmt: skip
    assert status != 0 and "MemoryError" in output
