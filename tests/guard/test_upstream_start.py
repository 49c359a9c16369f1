"""The guard starts its upstreams at once, each with ``mcp.start_timeout_sec`` to answer ``initialize`` and
``tools/list``: one that never answers is one line naming it on stderr, its process is stopped, and the guard serves
the others; when none starts, the guard exits 2 naming each. Through the CLI and the SDK's client."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession

from .test_attacks import SERVER
from .test_mcp_guard import guarded
from .test_upstream_wire import RAW

NOTED = ("import runpy, sys, time; open({note!r}, 'w').write(repr(time.time())); time.sleep(4); sys.argv = ['s']; "
         "runpy.run_path({server!r}, run_name='__main__')")
HELLO_LINE = ('{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", '
              '"capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}\n')  # fmt: skip
HUNG = "import os, time; open({pid!r}, 'w').write(str(os.getpid())); time.sleep(600)"


def server(name: str, code: str) -> str:
    return f'[mcp.servers.{name}]\ncommand = ["{sys.executable}", "-c", "{code}"]\n'


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not); a process reaped between the two looks is gone (found in a run:
    its ``/proc`` entry vanished after ``kill(pid, 0)`` found it)."""
    try:
        os.kill(pid, 0)
        return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
    except (ProcessLookupError, FileNotFoundError):
        return False


def guard_env(tmp_path: Path) -> dict[str, str]:
    """The guard's environment: its home and configuration in ``tmp_path``."""
    return {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"),
            "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")}  # fmt: skip


def served(tmp_path: Path, config: str, *, text: bool = False, under: tuple[str, ...] = ()) -> subprocess.Popen[Any]:
    """``groundstate mcp serve`` over ``config`` (run under the command ``under``, if any), its three streams piped."""
    (tmp_path / "groundstate.toml").write_text(config)
    return subprocess.Popen([*under, sys.executable, "-m", "groundstate", "mcp", "serve"], cwd=tmp_path, text=text,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=guard_env(tmp_path))  # fmt: skip


def raw_with_child(child: str, **env: str) -> str:
    """The configuration of the hand-written server starting ``child`` (Python code) as a process of its own."""
    extra = "".join(f", {key} = {json.dumps(value)}" for key, value in env.items())
    return (f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "{RAW}"]\n'
            f'env = {{ RAW_UPSTREAM_CHILD = {json.dumps(child)}{extra} }}\n')  # fmt: skip


def until(done: Callable[[], bool], seconds: float) -> bool:
    """Whether ``done()`` came true within ``seconds``, asked every 0.1 s."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def written_pid(pid_file: Path) -> int:
    """The pid a process wrote to ``pid_file``, once written (30 s at most)."""
    until(lambda: pid_file.exists() and bool(pid_file.read_text()), 30)
    return int(pid_file.read_text())


def parent_of(pid: int) -> int:
    """The parent of the process ``pid``."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])


def kill_left(pids: Iterable[int]) -> None:
    """SIGKILL those of ``pids`` still running (a test's cleanup)."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def pid_in(pid_file: Path) -> list[int]:
    """The pid in ``pid_file``, if one was written."""
    return [int(pid_file.read_text())] if pid_file.exists() and pid_file.read_text() else []


def test_a_server_that_never_answers_is_named_stopped_and_the_others_served(tmp_path: Path) -> None:
    pid_file = tmp_path / "hung.pid"
    config = ('[mcp]\nstart_timeout_sec = 3\n' + server("hung", HUNG.format(pid=str(pid_file)).replace('"', '\\"'))
              + f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n')  # fmt: skip

    async def use(client: ClientSession) -> list[str]:
        return [tool.name for tool in (await client.list_tools()).tools]

    started = time.monotonic()
    tools, stderr = guarded(tmp_path, config, use, stderr=True)
    assert tools == ["lying__append"] and time.monotonic() - started < 60
    [line] = [line for line in stderr.splitlines() if "hung" in line]
    assert line == ("groundstate mcp guard: left out mcp.servers.hung: did not start within 3 s "
                    "(mcp.start_timeout_sec): no answer to initialize or tools/list")  # fmt: skip
    assert "Traceback" not in stderr
    pid = int(pid_file.read_text())
    assert until(lambda: not alive(pid), 10), "the server that never answered is still running"


def terminated(tmp_path: Path, code: str, pid_file: Path, signals: int, sent: int = signal.SIGTERM) -> None:
    """A guard serving one stdio upstream (``code``, which writes the pid of the process to watch to ``pid_file``)
    sent SIGTERM ``signals`` times, 0.1 s apart: it ends as the signal ends a process, without a traceback, and the
    watched process does not outlive it."""
    guard = served(tmp_path, "[mcp]\nstart_timeout_sec = 60\n" + server("upstream", code.replace('"', '\\"')))
    try:
        pid = written_pid(pid_file)
        for number in range(signals):
            if number:
                time.sleep(0.1)
            guard.send_signal(sent)
        _, stderr = guard.communicate(timeout=30)
        assert guard.returncode == -sent and b"Traceback" not in stderr, stderr
        assert until(lambda: not alive(pid), 5), "a process of the guard's server outlived it"
    finally:
        guard.kill()
        kill_left(pid_in(pid_file))


def test_a_guard_told_to_terminate_stops_its_servers_first(tmp_path: Path) -> None:
    """SIGTERM (what an MCP client sends a server slow to exit) ends the guard at once: its servers, each in a
    session of its own, are stopped first, not orphaned — here one that ignores its closed stdin and SIGTERM."""
    pid_file = tmp_path / "hung.pid"
    stubborn = ("import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)")  # fmt: skip
    terminated(tmp_path, stubborn, pid_file, signals=1)


def test_a_guard_whose_terminal_closed_stops_its_servers_first(tmp_path: Path) -> None:
    """SIGHUP (the terminal it ran in closed) as SIGTERM: the server that ignores both is not left behind."""
    pid_file = tmp_path / "hung.pid"
    stubborn = ("import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "signal.signal(signal.SIGHUP, signal.SIG_IGN); "
                f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)")  # fmt: skip
    terminated(tmp_path, stubborn, pid_file, signals=1, sent=signal.SIGHUP)


def test_a_second_sigterm_while_servers_stop_leaves_none_of_their_processes(tmp_path: Path) -> None:
    """A client or service manager that sends TERM twice: the second waits for the first's stopping, which still
    kills what ignores TERM in the servers' groups (here a server's child; the server itself leaves at once)."""
    pid_file = tmp_path / "child.pid"
    child = ("import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
             f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)")  # fmt: skip
    parent = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(600)"
    terminated(tmp_path, parent, pid_file, signals=2)


SETSID_CHILD = ("import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "open({pid!r}, 'w').write(str(os.getpid())); time.sleep(600)")


def test_a_servers_child_in_a_session_of_its_own_is_stopped_when_the_client_leaves(tmp_path: Path) -> None:
    """A server's child that calls ``setsid()`` (out of the server's process group, where the group's signals do not
    reach) and ignores SIGTERM: stopped with the server all the same."""
    pid_file = tmp_path / "child.pid"
    child = SETSID_CHILD.format(pid=str(pid_file))
    (tmp_path / "groundstate.toml").write_text(raw_with_child(child))
    done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve"], input=HELLO_LINE, text=True,
                          capture_output=True, cwd=tmp_path, timeout=60, env=guard_env(tmp_path))  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    pid = int(pid_file.read_text())
    try:
        assert until(lambda: not alive(pid), 5), "a server's child in a session of its own outlived the guard"
    finally:
        kill_left([pid])


def test_a_guard_told_to_terminate_stops_a_servers_child_in_a_session_of_its_own(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    child = SETSID_CHILD.format(pid=str(pid_file))
    parent = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(600)"
    terminated(tmp_path, parent, pid_file, signals=1)


def test_servers_start_at_once(tmp_path: Path) -> None:
    """Each server notes when its process began, then takes 4 s to answer: started one after another, each would
    begin only once the one before had answered (8 s and more apart); started at once, all begin within the first
    one's 4 s — however loaded the machine is, no wall-clock bound on the whole."""
    config = "[mcp]\nstart_timeout_sec = 30\n" + "".join(
        server(f"s{n}", NOTED.format(server=str(SERVER), note=str(tmp_path / f"s{n}.began"))
               .replace('"', '\\"')) for n in range(3))  # fmt: skip

    async def use(client: ClientSession) -> list[str]:
        return [tool.name for tool in (await client.list_tools()).tools]

    tools = guarded(tmp_path, config, use)
    assert tools == ["s0__append", "s1__append", "s2__append"]
    began = [float((tmp_path / f"s{n}.began").read_text()) for n in range(3)]
    assert max(began) - min(began) < 4, began


def test_no_server_started_is_exit_2_naming_each(tmp_path: Path) -> None:
    config = ("[mcp]\nstart_timeout_sec = 1\n" + server("a", "import time; time.sleep(60)")
              + server("b", "raise SystemExit(3)"))  # fmt: skip
    (tmp_path / "groundstate.toml").write_text(config)
    done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve"], cwd=tmp_path, stdin=subprocess.PIPE,
                          env=guard_env(tmp_path), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "mcp.servers.a: did not start within 1 s" in done.stderr
    assert "mcp.servers.b: cannot start or reach the server" in done.stderr and "Traceback" not in done.stderr


def test_a_tool_name_over_64_characters_is_listed_shortened_and_still_routed(tmp_path: Path) -> None:
    long = "append_" + "x" * 70
    config = (f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n'
              f'env = {{ EFFECT_TOOL_NAME = "{long}" }}\n')  # fmt: skip
    effects = tmp_path / "effects.txt"

    async def use(client: ClientSession) -> tuple[str, str]:
        [tool] = (await client.list_tools()).tools
        result = await client.call_tool(tool.name, {"path": str(effects)})
        return tool.name, result.content[0].text  # type: ignore[union-attr]

    (name, text), stderr = guarded(tmp_path, config, use, stderr=True)
    assert len(name) == 64 and name.startswith("lying__append_xxx") and text == "appended"
    assert effects.read_text() == "ran\n"  # routed to the tool of the long name
    assert f"the tool lying__{long} is listed as {name} (OpenAI's and Anthropic's APIs refuse function names" in stderr


def test_an_upstreams_stderr_goes_to_its_log_not_the_guards(tmp_path: Path) -> None:
    config = f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\nenv = {{ EFFECT_NOISE = "1" }}\n'

    async def use(client: ClientSession) -> int:
        return len((await client.list_tools()).tools)

    count, stderr = guarded(tmp_path, config, use, stderr=True)
    assert count == 1 and "noise" not in stderr
    assert "a line of noise on stderr" in (tmp_path / "home" / "logs" / "mcp-lying.log").read_text()


DAEMON = ("import os, signal, time; os.fork() and os._exit(0); os.setsid(); os.fork() and os._exit(0); "
          "signal.signal(signal.SIGTERM, signal.SIG_IGN); open({pid!r}, 'w').write(str(os.getpid())); "
          "time.sleep(600)")  # fmt: skip  # forks twice, the first child and the parent leave: a daemon


def test_a_daemon_a_server_left_behind_is_stopped_with_the_guard(tmp_path: Path) -> None:
    """A server's child that forks twice and exits (a daemon: its parent gone, it belonged to no tree the guard could
    walk, and init adopted it) and ignores SIGTERM: the server's keeper (the guard's child) adopts it, and it ends
    when the guard's client leaves."""
    pid_file = tmp_path / "daemon.pid"
    daemon = DAEMON.format(pid=str(pid_file))
    guard = served(tmp_path, raw_with_child(daemon), text=True)
    try:
        pid = written_pid(pid_file)
        keeper = parent_of(pid)
        assert parent_of(keeper) == guard.pid and "keeper.py" in Path(f"/proc/{keeper}/cmdline").read_text(), \
            "the daemon was not adopted by its server's keeper"
        _, stderr = guard.communicate(timeout=30)  # the client leaves: its input ends
        assert guard.returncode == 0 and "Traceback" not in stderr, stderr
        assert until(lambda: not alive(pid), 5), "a daemon a server left behind outlived the guard"
    finally:
        guard.kill()
        kill_left(pid_in(pid_file))


def test_a_guard_told_to_terminate_stops_a_daemon_a_server_left_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    daemon = DAEMON.format(pid=str(pid_file))
    parent = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {daemon!r}]); time.sleep(600)"
    terminated(tmp_path, parent, pid_file, signals=1)


def _daemons_left(tmp_path: Path, code: str, end: str, settle: float = 1.0) -> list[int]:
    """A guard over the hand-written server whose child runs ``code`` (which writes the pid of every process it
    makes into ``{pids}``, a directory); the guard ended by ``end`` — ``eof`` (its client leaves), ``term`` (SIGTERM)
    or ``eof+term`` (the client leaves, and sends SIGTERM 2.15 s later, as the SDK's client does when the guard is
    not gone within 2 s). The recorded processes still running afterwards (each then killed)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    guard = served(tmp_path, raw_with_child(code.replace("{pids!r}", repr(str(pids)))))
    try:
        until(lambda: any(pids.iterdir()), 30)
        time.sleep(settle)
        assert guard.stdin is not None
        if end.startswith("eof"):
            guard.stdin.close()
        if end == "eof+term":
            time.sleep(2.15)
        if end.endswith("term"):
            guard.send_signal(signal.SIGTERM)
        guard.wait(timeout=60)
        assert guard.stderr is not None and b"Traceback" not in guard.stderr.read()
        time.sleep(0.5)
        return [pid for pid in noted(pids) if alive(pid)]
    finally:
        guard.kill()
        kill_left(noted(pids))


_NOTE = "def note(): open(os.path.join({pids!r}, str(os.getpid())), 'w').close()\n"


def noted(pids: Path) -> list[int]:
    """The pids ``note()`` recorded in the directory ``pids``."""
    return [int(entry.name) for entry in pids.iterdir()]

PHOENIX = ("import os, signal, time\n" + _NOTE +  # a daemon that, told to stop, forks anew and leaves
           "if os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
           "def again(*_):\n    if os.fork(): os._exit(0)\n    os.setsid(); note()\n"
           "signal.signal(signal.SIGTERM, again); signal.signal(signal.SIGHUP, again)\nnote()\n"
           "while True: time.sleep(1)\n")  # fmt: skip

BREEDER = ("import os, signal, time\n" + _NOTE +  # ignores SIGTERM, leads no group, forks a child every 50 ms
           "c = os.fork()\nif c:\n    os.waitpid(c, 0); os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nnote()\n"
           "while True:\n    if os.fork() == 0:\n        os.setsid(); note(); time.sleep(600); os._exit(0)\n"
           "    time.sleep(0.05)\n")  # fmt: skip

LINGERER = ("import os, signal, time\n" + _NOTE +  # ignores SIGTERM, leads no group, holds the server's stdout
            "c = os.fork()\nif c:\n    os.waitpid(c, 0); os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nnote()\ntime.sleep(600)\n")  # fmt: skip


@pytest.mark.parametrize("end", ["eof", "term"])
def test_a_daemon_that_forks_anew_when_stopped_does_not_outlive_the_guard(tmp_path: Path, end: str) -> None:
    """Found by an attack: the guard looked once at what was below it, so a daemon that answers SIGTERM by forking
    again (and leaving) escaped to init; one that forks all along left its newest children."""
    assert _daemons_left(tmp_path, PHOENIX, end) == []


HYDRA = ("import os, signal, time\n" + _NOTE +  # told to stop, hands itself on to a new child every millisecond
         "if os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
         "def again(*_):\n    while True:\n        if os.fork(): os._exit(0)\n        note(); time.sleep(0.001)\n"
         "signal.signal(signal.SIGTERM, again)\nnote()\nwhile True: time.sleep(1)\n")  # fmt: skip


@pytest.mark.parametrize("end", ["eof", "term"])
def test_a_daemon_that_hands_itself_on_every_millisecond_does_not_outlive_the_guard(tmp_path: Path, end: str) -> None:
    """Found by an attack: one look at the tree could fall between a link of such a chain exiting and the next
    appearing, and the guard took the tree for empty; the chain ran on as init's. The guard now looks until several
    looks in a row find nothing below it, alive or just exited."""
    try:
        assert _daemons_left(tmp_path, HYDRA, end) == []
    finally:
        for _ in range(50):  # the chain, if it escaped, is one process group: stopped whole, whatever link runs now
            for pid in noted(tmp_path / "pids"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
            time.sleep(0.01)


@pytest.mark.parametrize("end", ["eof", "term"])
def test_a_daemon_that_forks_all_along_leaves_no_child_behind(tmp_path: Path, end: str) -> None:
    assert _daemons_left(tmp_path, BREEDER, end) == []


def test_the_sdk_clients_sigterm_during_the_guards_last_pass_does_not_skip_it(tmp_path: Path) -> None:
    """The SDK's client closes the guard's input, waits 2 s, then sends SIGTERM — while the guard, having waited for
    a server whose daemon holds its output, makes its last pass over what is below it. The signal cut that pass
    short, and the daemon (leading no group, ignoring SIGTERM) outlived the guard. It now waits for the pass."""
    assert _daemons_left(tmp_path, LINGERER, "eof+term") == []


def test_the_daemons_that_exit_while_the_guard_runs_are_reaped(tmp_path: Path) -> None:
    """An adopted daemon that exits is the guard's zombie until reaped: 300 of them stayed until the guard ended (a
    server could fill the process table). They are reaped within two scans."""
    many = ("import os, time\n" + _NOTE + "for _ in range(300):\n    if os.fork() == 0:\n"
            "        if os.fork(): os._exit(0)\n        os._exit(0)\n    os.wait()\n"
            "note()\ntime.sleep(600)\n")  # fmt: skip
    pids = tmp_path / "pids"
    pids.mkdir()
    guard = served(tmp_path, raw_with_child(many.replace("{pids!r}", repr(str(pids)))))
    try:
        until(lambda: any(pids.iterdir()), 30)

        def zombies() -> int:
            """The guard's children that exited and wait to be reaped."""
            count = 0
            for entry in Path("/proc").iterdir():
                with contextlib.suppress(OSError, IndexError):
                    fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
                    count += fields[0] == "Z" and int(fields[1]) == guard.pid
            return count

        until(lambda: zombies() < 10, 10)
        assert zombies() < 10
    finally:
        guard.communicate(timeout=60)  # its client leaves: the guard stops the server and what is below it
        kill_left(noted(pids))


def test_a_guard_that_is_a_containers_first_process_ends_on_sigterm(tmp_path: Path) -> None:
    """The first process of a PID namespace (a container's entrypoint) is spared its own default signals: the guard
    stopped its servers on SIGTERM, then raised the signal on itself and ran on. It now ends all the same."""
    guard = served(tmp_path, f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "{RAW}"]\n',
                   under=("unshare", "--fork", "--pid", "--mount-proc"))
    try:
        children = Path(f"/proc/{guard.pid}/task/{guard.pid}/children")  # the guard: unshare's child, pid 1 inside
        assert until(lambda: bool(children.read_text().split()), 60)
        inner = int(children.read_text().split()[0])
        assert guard.stderr is not None
        while b"upstream server(s)" not in guard.stderr.readline():  # serving: its handlers are in place
            pass
        os.kill(inner, signal.SIGTERM)
        assert guard.wait(timeout=30) != 0  # it ended (unshare reports its child's death by the signal)
    finally:
        guard.kill()


def test_a_server_that_exits_at_once_leaving_a_daemon_on_its_output_is_named_so_at_once(tmp_path: Path) -> None:
    """Found by an attack: a server that exits while a daemon it started keeps its output open was waited on for all
    of start_timeout_sec, then called slow ("did not start within 30 s"); and the guard's exit printed "Exception
    ignored … Event loop is closed". Now its start fails within a second or two, saying it exited."""
    pid_file = tmp_path / "daemon.pid"
    daemon = DAEMON.format(pid=str(pid_file))
    (tmp_path / "groundstate.toml").write_text("[mcp]\nstart_timeout_sec = 30\n"
                                               + raw_with_child(daemon, RAW_UPSTREAM_EXIT="1")
                                               + f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n')
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve"], input=HELLO_LINE, text=True,
                              capture_output=True, cwd=tmp_path, timeout=60, env=guard_env(tmp_path))  # fmt: skip
        assert time.monotonic() - started < 20, "the server's exit was waited out as a slow start"
        [line] = [line for line in done.stderr.splitlines() if "left out" in line]
        assert "mcp.servers.raw" in line and "exited (status 0)" in line, line
        assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
        assert '"result"' in done.stdout  # the other server is served
    finally:
        kill_left(pid_in(pid_file))


def ends_with_a_kill(process: subprocess.Popen[Any], pid_file: Path) -> bool:
    """Whether the process that wrote ``pid_file`` ends within 10 s of ``process`` being killed outright (SIGKILL:
    no handler of it runs; a server's keeper gives what is left 2 s to leave on its own, then 1.5 s once
    terminated). Whatever is left is killed afterwards."""
    try:
        pid = written_pid(pid_file)
        process.kill()
        process.wait(timeout=10)
        return until(lambda: not alive(pid), 10)
    finally:
        process.kill()
        kill_left(pid_in(pid_file))


def test_a_server_does_not_outlive_a_guard_killed_outright(tmp_path: Path) -> None:
    """A guard killed outright (SIGKILL, the out-of-memory killer) runs no handler: its server, in a session of its
    own and waiting for nothing on its input, ran on as init's. The kernel now kills it with the guard."""
    pid_file = tmp_path / "server.pid"
    guard = served(tmp_path, server("hung", HUNG.format(pid=str(pid_file))))
    assert ends_with_a_kill(guard, pid_file), "the server outlived the guard killed outright"


STUBBORN = ("import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "open({pid!r}, 'w').write(str(os.getpid())); time.sleep(600)")  # fmt: skip  # ignores input and SIGTERM
WRAPPER = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {code!r}]); time.sleep(600)"


def test_a_server_behind_a_wrapper_does_not_outlive_a_guard_killed_outright(tmp_path: Path) -> None:
    """A server started through a wrapper (``sh -c``, ``npx``, ``uvx``: here a Python one) that ignores its closed
    input and SIGTERM: the kernel killed the wrapper with the guard, and the real server ran on as init's. Its
    keeper now stops what is below it once the guard is gone."""
    pid_file = tmp_path / "server.pid"
    wrapped = WRAPPER.format(code=STUBBORN.format(pid=str(pid_file)))
    guard = served(tmp_path, server("wrapped", wrapped.replace('"', '\\"')))
    assert ends_with_a_kill(guard, pid_file), "the server behind a wrapper outlived the guard killed outright"


def test_a_daemon_a_server_left_behind_does_not_outlive_a_guard_killed_outright(tmp_path: Path) -> None:
    """A daemon a server left (forked twice, its parent gone) was adopted by the guard and stopped when the guard
    ended — but a guard killed outright stops nothing, and the daemon ran on as init's. Its keeper stops it."""
    pid_file = tmp_path / "daemon.pid"
    guard = served(tmp_path, raw_with_child(DAEMON.format(pid=str(pid_file))))
    assert ends_with_a_kill(guard, pid_file), "a daemon a server left behind outlived the guard killed outright"


def test_a_left_out_servers_daemon_ends_when_the_server_is_left_out(tmp_path: Path) -> None:
    """A server that never answers is stopped and left out while the guard serves the others: the daemon it had
    started ran on until the guard ended. It now ends with its server, the guard still serving."""
    pid_file = tmp_path / "daemon.pid"
    hung = WRAPPER.format(code=DAEMON.format(pid=str(pid_file)))
    config = ('[mcp]\nstart_timeout_sec = 3\n' + server("hung", hung.replace('"', '\\"'))
              + f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n')  # fmt: skip

    async def use(client: ClientSession) -> tuple[list[str], bool]:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        daemon = written_pid(pid_file)
        return tools, until(lambda: not alive(daemon), 10)  # asked while the guard serves

    try:
        (tools, ended), stderr = guarded(tmp_path, config, use, stderr=True)
        assert tools == ["lying__append"] and "left out mcp.servers.hung" in stderr, stderr
        assert ended, "the daemon of a left-out server ran on while the guard served"
    finally:
        kill_left(pid_in(pid_file))


def test_a_server_that_cannot_be_started_is_named_as_before(tmp_path: Path) -> None:
    """Under its keeper a server's program is found before anything starts, so a missing or non-executable one is
    still named for what it is, not as a server that exited."""
    (tmp_path / "plain.txt").write_text("not a program")
    config = ('[mcp.servers.missing]\ncommand = ["groundstate-no-such-program"]\n'
              f'[mcp.servers.plain]\ncommand = ["{tmp_path / "plain.txt"}"]\n'
              f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n')  # fmt: skip

    async def use(client: ClientSession) -> list[str]:
        return [tool.name for tool in (await client.list_tools()).tools]

    tools, stderr = guarded(tmp_path, config, use, stderr=True)
    assert tools == ["lying__append"]
    assert ("left out mcp.servers.missing: cannot start or reach the server: FileNotFoundError: [Errno 2] No such "
            "file or directory: 'groundstate-no-such-program'") in stderr, stderr
    assert "left out mcp.servers.plain: cannot start or reach the server: PermissionError: [Errno 13]" in stderr


HOPPER = ("import os, time\n"  # a daemon that hands itself on to a new pid without pause (for 60 s at most)
          "if os.fork(): os._exit(0)\nos.setsid()\nopen({group!r}, 'w').write(str(os.getpgrp()))\n"
          "end = time.monotonic() + 60\nwhile time.monotonic() < end:\n    if os.fork(): os._exit(0)\n")  # fmt: skip


def group_alive(group: int) -> bool:
    """Whether any process of the process group ``group`` still runs."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("end", ["eof", "kill"])
def test_a_daemon_that_hands_itself_on_without_pause_does_not_outlive_the_guard(tmp_path: Path, end: str) -> None:
    """Found by an attack: a daemon forking anew without pause is at another pid by the time any look at the tree
    signals the one it saw — it outlived the guard's end (it did before the keeper) and a guard killed outright. Its
    process group, which only processes below the keeper can be in, is now stopped whole."""
    group_file = tmp_path / "group"
    guard = served(tmp_path, raw_with_child(HOPPER.format(group=str(group_file))))
    group = written_pid(group_file)
    try:
        assert guard.stdin is not None
        if end == "eof":
            guard.stdin.close()
        else:
            guard.kill()
        guard.wait(timeout=60)
        assert until(lambda: not group_alive(group), 15), "the daemon handing itself on outlived the guard"
    finally:
        guard.kill()
        for _ in range(100):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)


SIDECAR = ("import os, time\n"  # inherited by the guard, in a session of its own; leaves an orphan it adopts
           "os.setsid()\nopen(os.path.join({pids!r}, 'inherited'), 'w').write(str(os.getpid()))\ntime.sleep(3)\n"
           "if os.fork() == 0:\n    if os.fork() == 0:\n"
           "        open(os.path.join({pids!r}, 'orphan'), 'w').write(str(os.getpid())); time.sleep(600)\n"
           "    os._exit(0)\nos.wait()\ntime.sleep(600)\n")  # fmt: skip


def test_stopping_an_adopted_orphan_spares_the_inherited_process_in_its_session(tmp_path: Path) -> None:
    """Found by an attack: a process the guard inherited (``sidecar & exec groundstate mcp serve``), in a session of
    its own, left an orphan the guard adopted; stopping the orphan with its whole process group killed the
    inherited sidecar too. A group is signalled whole only where its session holds nothing outside the tree."""
    pids = tmp_path / "pids"
    pids.mkdir()
    (tmp_path / "groundstate.toml").write_text(f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n')
    sidecar = f"{sys.executable} -c {shlex.quote(SIDECAR.format(pids=str(pids)))}"
    line = f"{sidecar} </dev/null >/dev/null 2>&1 & exec {sys.executable} -m groundstate mcp serve"
    guard = subprocess.Popen(["sh", "-c", line], cwd=tmp_path, env=guard_env(tmp_path), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    inherited, orphan = pids / "inherited", pids / "orphan"
    try:
        assert until(orphan.exists, 30) and parent_of(written_pid(orphan)) == guard.pid, "the guard did not adopt"
        _, stderr = guard.communicate(timeout=60)  # its client leaves: the guard stops what it adopted
        assert b"Traceback" not in stderr, stderr
        assert until(lambda: not alive(written_pid(orphan)), 5), "the adopted orphan outlived the guard"
        assert alive(written_pid(inherited)), "the guard stopped a process it inherited"
    finally:
        guard.kill()
        kill_left(pid_in(inherited) + pid_in(orphan))
