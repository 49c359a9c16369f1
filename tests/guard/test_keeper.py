"""Each stdio server runs under a keeper (``providers/keeper.py``) that ends the server's whole tree with it: what
the keeper changes must not show — the server's exit status, its environment, a program that cannot be started —
and where there is no keeper (not Linux) a server is started directly and served the same."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from groundstate.config import McpServerConfig
from groundstate.providers import McpServerError, connect

from .test_upstream_start import ends_with_a_kill, served
from .test_upstream_wire import RAW

EXITING = "import os, signal, sys; code = int(sys.argv[1]); os.kill(os.getpid(), -code) if code < 0 else sys.exit(code)"


def left_out_reason(command: list[str], env: dict[str, str] | None = None) -> str:
    """Why ``connect`` left out a server started as ``command`` (beside a working one, so the guard goes on)."""

    async def connected() -> str:
        async with contextlib.AsyncExitStack() as stack:
            servers = {"probe": McpServerConfig(command=command, env=env or {}),
                       "raw": McpServerConfig(command=[sys.executable, RAW])}  # fmt: skip
            upstreams = await connect(servers, stack, 20, partial=True)
            assert set(upstreams.sessions) == {"raw"}
            return upstreams.failed["probe"]

    return asyncio.run(connected())


@pytest.mark.parametrize("code", [0, 3, -signal.SIGKILL, -signal.SIGTERM])
def test_a_servers_exit_status_is_its_own_not_its_keepers(code: int) -> None:
    """The keeper ends as its server ended: with its code, or by its signal (asyncio's negative status)."""
    reason = left_out_reason([sys.executable, "-c", EXITING, str(code)])
    assert reason.endswith(f"exited (status {code})"), reason


@pytest.mark.parametrize("keeping", [True, False])
def test_a_server_is_served_with_and_without_a_keeper(keeping: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a keeper (where the system has no child subreaper) the server is started directly, and the guard
    speaks to it the same."""
    from groundstate.providers import mcp_stdio

    monkeypatch.setattr(mcp_stdio, "KEEPING", keeping)

    async def listed() -> tuple[list[str], int, str]:
        async with contextlib.AsyncExitStack() as stack:
            upstreams = await connect({"raw": McpServerConfig(command=[sys.executable, RAW])}, stack, 20)
            session = upstreams.sessions["raw"]
            result = await session.call_tool("probe", {"act": "pid"})
            parent = int(Path(f"/proc/{result.content[0].text}/stat").read_text().rsplit(") ", 1)[1].split()[1])
            return [tool.name for tool in upstreams.tools["raw"]], parent, Path(f"/proc/{parent}/cmdline").read_text()

    tools, parent, command = asyncio.run(listed())
    assert "probe" in tools
    if keeping:
        assert "keeper.py" in command and parent != os.getpid(), command
    else:
        assert parent == os.getpid(), "without a keeper the server is the caller's own child"


def test_the_servers_python_settings_do_not_reach_its_keeper(tmp_path: Path) -> None:
    """The keeper runs isolated (``-I -S``): ``PYTHONPATH`` in a server's environment is the server's — a module
    placed there is not what the keeper imports, and the server still gets the variable."""
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "imported-by"
    for module in ("select", "signal", "contextlib", "ctypes"):
        (planted / f"{module}.py").write_text(f"import sys\nopen({str(marker)!r}, 'a').write(sys.argv[0] + '\\n')\n"
                                              "raise SystemExit(9)\n")  # fmt: skip
    reason = left_out_reason(["/bin/sh", "-c", "exit 4"], env={"PYTHONPATH": str(planted)})
    assert reason.endswith("exited (status 4)"), reason
    assert not marker.exists(), marker.read_text()


def test_a_server_is_started_under_the_name_it_was_given(tmp_path: Path) -> None:
    """The keeper finds the program on the server's ``PATH`` first, but the server's own name for itself
    (``argv[0]``) is the one configured — a multi-call program (``busybox``) tells its roles apart by it."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "myserver").symlink_to(sys.executable)
    named = "import sys; sys.exit(0 if sys.orig_argv[0] == 'myserver' else 7)"
    reason = left_out_reason(["myserver", "-c", named], env={"PATH": str(tmp_path / "bin")})
    assert reason.endswith("exited (status 0)"), reason


def test_a_server_starts_with_the_signals_a_program_started_directly_has() -> None:
    """Found by an attack: Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec — a
    server under the keeper could not die of SIGPIPE (a pipeline's writer ran forever)."""
    reason = left_out_reason(["/bin/sh", "-c", "kill -PIPE $$; exit 3"])
    assert reason.endswith(f"exited (status {-signal.SIGPIPE})"), reason


CLOSING_ITS_INPUT = """
import os, sys, time
sys.stdin.readline()
os.close(0)
print('{"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "capabilities": {}, '
      '"serverInfo": {"name": "closing", "version": "1"}}}', flush=True)
time.sleep(0.5)
sys.exit(5)
"""


def test_a_server_that_exits_just_after_closing_its_input_is_reported_as_exited() -> None:
    """Found in CI (a slow machine): a server that died before the guard wrote to it was reported as "no longer
    reads its input" — its exit, the news, came second. A server that closes its input and then exits is
    reported with its exit status, whichever the guard notices first."""
    reason = left_out_reason([sys.executable, "-c", CLOSING_ITS_INPUT])
    assert reason.endswith("exited (status 5)"), reason


@pytest.mark.parametrize("given", [None, "POSIX", "de_DE.UTF-8"])
def test_the_servers_locale_is_its_own(given: str | None) -> None:
    """Found by an attack: Python's locale coercion set ``LC_CTYPE=C.UTF-8`` in the keeper, and every server got it.
    A server has the ``LC_CTYPE`` its environment names, or none."""
    check = 'test -z "${LC_CTYPE+x}"' if given is None else f'test "$LC_CTYPE" = "{given}"'
    reason = left_out_reason(["/bin/sh", "-c", f"{check} && exit 6 || exit 5"],
                             env={} if given is None else {"LC_CTYPE": given})  # fmt: skip
    assert reason.endswith("exited (status 6)"), reason


@pytest.mark.parametrize(("first_line", "error"), [
    ("#!/nonexistent/interpreter\n", "FileNotFoundError: [Errno 2] No such file or directory"),
    ("echo no interpreter named\n", "OSError: [Errno 8] Exec format error"),
])  # fmt: skip
def test_a_program_exec_refuses_is_named_with_execs_own_error(tmp_path: Path, first_line: str, error: str) -> None:
    """Found by an attack: a script whose interpreter is missing, or a file no system can run, was reported as a
    server that exited with status 127. The error ``exec`` gave is the start's error, as without a keeper."""
    script = tmp_path / "server"
    script.write_text(first_line)
    script.chmod(0o755)
    reason = left_out_reason([str(script)])
    assert f"{error}: '{script}'" in reason, reason


def running_with_argument(argument: str) -> list[int]:
    """The pids of the processes whose command line holds ``argument``."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and argument.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def test_a_start_cancelled_while_the_keeper_starts_leaves_nothing() -> None:
    """Found by an attack: a start cancelled while the guard waited for the keeper's report (a start timeout of a
    few milliseconds, a guard stopping) left the keeper and its server running until the guard ended; and a keeper
    killed between its fork and the server's request for a parent-death signal left the server running as init's."""
    marker = f"{os.getpid()}.25"  # a sleep no other process runs

    async def started(timeout: float) -> None:
        async with contextlib.AsyncExitStack() as stack:
            with contextlib.suppress(McpServerError):
                await connect({"slow": McpServerConfig(command=["sleep", marker])}, stack, timeout)

    async def many(timeout: float) -> None:  # started at once: some are cancelled between the keeper's fork and
        async with contextlib.AsyncExitStack() as stack:  # the server's exec (found by the next attack: a keeper
            with contextlib.suppress(McpServerError):  # killed then left its server running as init's)
                servers = {f"slow{i}": McpServerConfig(command=["sleep", marker]) for i in range(40)}
                await connect(servers, stack, timeout)

    for timeout in (0.002, 0.005, 0.01, 0.02, 0.04, 0.08):
        asyncio.run(started(timeout))
    for timeout in (0.01, 0.03, 0.06, 0.1):
        asyncio.run(many(timeout))
    deadline = time.monotonic() + 10
    while running_with_argument(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = running_with_argument(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "a cancelled start left its server running"


CONTROL_HOLDER = (  # the server's child: opens its keeper's control pipe through /proc, then leaves as a daemon
    "import os, signal, time\n"
    "keeper = os.getppid()\n"
    "while b'keeper.py' not in open(f'/proc/{{keeper}}/cmdline', 'rb').read():\n"
    "    keeper = int(open(f'/proc/{{keeper}}/stat').read().rsplit(') ', 1)[1].split()[1])\n"
    "control = open(f'/proc/{{keeper}}/cmdline', 'rb').read().split(b'\\0')[4].decode()\n"
    "held = os.open(f'/proc/{{keeper}}/fd/{{control}}', os.O_WRONLY)\n"
    "if os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nopen({pid!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n")


def test_a_server_holding_its_keepers_control_pipe_does_not_outlive_a_guard_killed_outright(tmp_path: Path) -> None:
    """Found by an attack: a server's child that opened a write end of its keeper's control pipe through /proc kept
    the keeper waiting after the guard was killed outright. The keeper is undumpable now (its descriptors are no
    same-user process's to open) and learns of the guard's death by a signal as well (here, as root, the pipe can
    still be opened: the signal is what ends it)."""
    pid_file = tmp_path / "daemon.pid"
    child = json.dumps(CONTROL_HOLDER.format(pid=str(pid_file)))
    lasting = f"{sys.executable} {RAW}; exec sleep 600"  # the server outlives the end of its input
    config = (f'[mcp.servers.raw]\ncommand = ["sh", "-c", {json.dumps(lasting)}]\n'
              f"env = {{ RAW_UPSTREAM_CHILD = {child} }}\n")
    guard = served(tmp_path, config)
    assert ends_with_a_kill(guard, pid_file), "a server holding its keeper's control pipe outlived the guard"
