"""The keeper: a small process between groundstate and one stdio MCP server that makes the server's whole tree end
with it — whatever the server starts, however groundstate ends.

Without it, the server is groundstate's child and what the server starts is not: a child behind a wrapper
(``sh -c``, ``npx``, ``uvx``) or a daemon (forked twice, its parent gone) runs on as init's when groundstate is
killed outright (SIGKILL, the out-of-memory killer: no handler runs, and ``PR_SET_PDEATHSIG`` reaches only the
direct child), and a daemon of a server stopped early (one left out for a slow start) waits for groundstate's own
end. The keeper is started in the server's place (``python -I -S keeper.py CONTROL_FD REPORT_FD LOCALE PATH PROGRAM
ARG...``: see ``main``; the server is the program at ``PATH``, its arguments ``PROGRAM ARG...`` as it was named):

- it becomes the subreaper of everything below it (Linux ``PR_SET_CHILD_SUBREAPER``): a process the server starts
  and leaves lands on the keeper, never on init;
- it starts the server (its stdin, stdout and stderr are the keeper's, which the keeper then lets go of, so the
  server's end of input and output is as if groundstate had started it);
- when the server exits, what it left is stopped (SIGTERM, ``LEFT_GRACE_SEC``, then SIGKILL until several looks in
  a row find nothing) and the keeper exits with the server's status (its code, or by the same signal);
- told to terminate (SIGTERM, SIGHUP, SIGINT: groundstate stopping the server's process group), it stops the whole
  tree the same way, with ``TERM_GRACE_SEC`` for the server to leave;
- when ``CONTROL_FD`` (the read end of a pipe whose write end only groundstate holds) reaches its end — groundstate
  closed it, or groundstate is gone, killed outright or not — or the parent-death signal (``ORPHANED``) says
  groundstate's thread that started it ended, the server gets ``EXIT_GRACE_SEC`` to leave on its own (its input has
  closed too), then the tree is stopped;
- a server that cannot be started is told on ``REPORT_FD`` (the ``errno`` of ``exec``, or of ``fork``), whose end
  without a word says it started; groundstate raises that error as starting the server directly would have.

The keeper is undumpable: a server of the same user cannot open its descriptors through ``/proc``.

It imports nothing of groundstate (it runs with ``-I -S``: no site, no environment variable of the server's
changes the interpreter) and nothing slow; ``server_processes`` uses its ``/proc`` readers too.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterable

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
ORPHANED = signal.SIGUSR1  # the keeper's parent-death signal: groundstate is gone, whoever holds the control pipe
LEFT_GRACE_SEC = 0.5  # what a server left behind gets to leave on SIGTERM once the server has exited
TERM_GRACE_SEC = 1.5  # the server's time to leave once the keeper is told to terminate (groundstate waits 2 s)
EXIT_GRACE_SEC = 2.0  # the server's time to leave on its own once groundstate is gone (its input closed with it)
KILL_ROUNDS = 200  # looks at the tree while stopping it: a killed process forks no more, so a few rounds empty it
QUIET_LOOKS = 3  # looks in a row that find nothing below before the tree is taken for empty: one look can fall
# between a daemon's exit and its new child's first appearance in /proc
EXITED = ("Z", "X")  # /proc's states of a process that has exited: a zombie, or dead
STOPPING = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
CANNOT_START = 127  # the keeper's status when the server's program could not be started (as a shell's)
# what the server starts with as the default, as a program started by subprocess would: Python ignores these at
# start-up, and an ignored signal stays ignored across exec (a pipeline's writer would never die of SIGPIPE)
DEFAULT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, name))
Seen = tuple[int, int, int]  # a process as seen: its start time (clock ticks since boot), process group, session
Table = dict[int, tuple[int, int, int]]  # every process: pid -> (parent, process group, session)


def stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (state first, then parent, group, …); None: no
    such process."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):  # gone since listed, or not a process
        return None


def processes() -> Table:
    """Every process on the machine: pid -> (parent pid, process group, session), read from /proc (empty where
    there is none)."""
    found: Table = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit() and (fields := stat(name)) is not None:
                found[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return found


def descendants(root: int, table: Table | None = None, spared: Iterable[int] = ()) -> list[int]:
    """The pids of every process below ``root`` — children, theirs, and so on, whatever session they moved to — but
    for the processes ``spared`` and what is below them."""
    below: dict[int, list[int]] = {}
    for pid, (parent, *_) in (processes() if table is None else table).items():
        below.setdefault(parent, []).append(pid)
    left_out = set(spared)
    found, pending = [], [pid for pid in below.get(root, []) if pid not in left_out]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(child for child in below.get(pid, []) if child not in left_out)
    return found


def running(pids: Iterable[int], exited: bool = False) -> dict[int, Seen]:
    """Those of ``pids`` that have not exited (with ``exited``, those that have and wait to be reaped too), each as
    seen (``Seen``) from one read of its stat."""
    found = {pid: stat(pid) for pid in pids}
    return {pid: (int(fields[19]), int(fields[2]), int(fields[3])) for pid, fields in found.items()
            if fields is not None and len(fields) > 19 and (exited or fields[0] not in EXITED)}  # fmt: skip


def signal_if_same(pid: int, started: int, signum: int) -> None:
    """Send ``signum`` to ``pid`` if it is still the process that started at ``started``."""
    fields = stat(pid)
    if fields is not None and len(fields) > 19 and int(fields[19]) == started:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def outside_sessions(table: Table, below: Iterable[int]) -> set[int]:
    """The sessions that hold a process other than this one and those ``below`` it: a process group of any other
    session holds only processes below this one, and no process from outside can ever join it (a session is joined
    only by being born into it), so it may be signalled whole."""
    inside, me = set(below), os.getpid()
    return {session for pid, (_, _, session) in table.items() if pid != me and pid not in inside}


def hit(pid: int, seen: Seen, signum: int, outside: set[int]) -> None:
    """Send ``signum`` to ``pid`` — and to its whole process group where that group's session is not ``outside``
    (and the group is not this process's own): a process that forks anew every moment keeps its group, so the
    signal reaches whatever pid it has moved on to — if it is still the process seen (its start time), never one the
    system gave to another since."""
    started, group, session = seen
    fields = stat(pid)
    if fields is None or len(fields) <= 19 or int(fields[19]) != started:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if session not in outside and group != os.getpgrp():
            os.killpg(group, signum)
        else:
            os.kill(pid, signum)


def stop_tree(below: Callable[[Table], list[int]], reap: Callable[[], bool], grace: float) -> None:
    """SIGTERM every process ``below(table)`` lists (with its group: ``hit``), give them ``grace`` seconds, then
    SIGKILL what is below — again until ``QUIET_LOOKS`` looks in a row find nothing, not even a process that just
    exited: a process that forks while it is stopped (on SIGTERM, or all along) leaves children no single look
    holds, and the caller, their subreaper, is where they land. ``reap`` reaps the caller's exited children it may;
    True while some wait to be."""
    table = processes()
    listed = below(table)
    outside = outside_sessions(table, listed)
    seen = running(listed)
    for pid, what in seen.items():
        hit(pid, what, signal.SIGTERM, outside)
    deadline = time.monotonic() + grace
    while seen and time.monotonic() < deadline:
        time.sleep(0.02)
        reap()
        seen = {pid: what for pid, what in running(seen).items() if seen[pid][0] == what[0]}
    quiet = 0
    for _ in range(KILL_ROUNDS):
        table = processes()
        listed = below(table)
        outside = outside_sessions(table, listed)
        alive = running(listed)
        # an exited process not yet reaped still names its group: the group of a process that forks anew without
        # pause is found through the links that just left it, as the live one is at another pid by any look
        for pid, what in running(listed, exited=True).items():
            hit(pid, what, signal.SIGKILL, outside)
        pending = reap()
        quiet = 0 if alive or pending else quiet + 1
        if quiet >= QUIET_LOOKS:
            return
        time.sleep(0.01)


def prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; False where the call does not exist (not Linux) or fails."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


class Keeper:
    """One server's keeper (see the module's docstring): the server's pid, its status once it exited, and the
    reasons to stop noted by the signal handlers and the control pipe."""

    def __init__(self, control: int, report: int) -> None:
        self.control, self.report = control, report
        self.pid = os.getpid()
        self.server = 0
        self.status: int | None = None  # the server's wait status, once it exited
        self.told: list[int] = []  # signals that told the keeper to terminate
        self.orphaned: list[int] = []  # the parent-death signal, once groundstate is gone
        self.wake_read, self.wake_write = os.pipe()
        for end in (self.wake_read, self.wake_write):
            os.set_blocking(end, False)

    def start(self, path: str, program: list[str], environment: dict[str, str]) -> None:
        """Start the server (the program at ``path``, its arguments ``program``, its ``environment``); the keeper
        keeps no end of its input or output. A server that cannot be started is reported on the report pipe (its
        ``errno``) as ``exec`` failed, and the keeper exits ``CANNOT_START``."""
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the loop (through the wake-up pipe)
        for number in STOPPING:
            signal.signal(number, lambda signum, _frame: self.told.append(signum))
        signal.signal(ORPHANED, lambda signum, _frame: self.orphaned.append(signum))
        try:
            self.server = os.fork()
        except OSError as exc:  # no process to be had (a limit reached): told as exec's failure would be
            self._failed(exc.errno or 0)
        if self.server == 0:
            self._become(path, program, environment)
        os.close(self.report)  # the child's copy closes on exec: the report's end says the server started
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # the server's output ends when the server (and what it left) closes it, not the keeper
        os.close(null)

    def _become(self, path: str, program: list[str], environment: dict[str, str]) -> None:
        """In the forked child: the server, with the signals at their defaults, nothing of the keeper's open but the
        report pipe (closed by exec), in a process group of its own (which the keeper may stop whole)."""
        try:
            signal.set_wakeup_fd(-1)
            for number in (signal.SIGCHLD, *STOPPING, ORPHANED, *DEFAULT_SIGNALS):
                signal.signal(number, signal.SIG_DFL)
            for end in (self.control, self.wake_read, self.wake_write):
                os.close(end)
            # the keeper killed outright takes the server with it — also if it was killed before the signal was
            # asked for (between fork and here: the child would be init's), which the parent's pid tells
            if not prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL)) or os.getppid() != self.pid:
                os._exit(CANNOT_START)
            os.setpgid(0, 0)
            os.execve(path, program, environment)
        except OSError as exc:
            self._failed(exc.errno or 0)
        except BaseException:  # whatever it was, the child must not return into the keeper
            self._failed(0)

    def _failed(self, number: int) -> None:
        """The server could not be started: its ``errno`` on the report pipe, and out."""
        with contextlib.suppress(OSError):
            os.write(self.report, str(number).encode())
        os._exit(CANNOT_START)

    def serve(self) -> int:
        """Wait for the server to exit, for a signal to terminate, or for the control pipe's end; stop what is
        left; the server's wait status."""
        gone = False
        while self.status is None and not self.told:
            if gone or self.orphaned:  # groundstate is gone (or done with the server): the server's input has closed
                self._wait_for_server(EXIT_GRACE_SEC)
                break
            with contextlib.suppress(InterruptedError):
                ready, _, _ = select.select([self.wake_read, self.control], [], [], None)
                if self.wake_read in ready:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_read, 512)
                gone = self.control in ready and not self._control_readable()
            self._reap()
        # told to terminate, or groundstate is gone and the server did not leave: it is terminated with the rest
        self._stop_tree(LEFT_GRACE_SEC if self.status is not None else TERM_GRACE_SEC)
        return self.status if self.status is not None else signal.SIGKILL

    def _control_readable(self) -> bool:
        """Whether the control pipe is still open (anything written to it is read and ignored)."""
        try:
            return bool(os.read(self.control, 512))
        except BlockingIOError:
            return True
        except OSError:
            return False

    def _wait_for_server(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self.status is None and not self.told and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.02)

    def _reap(self) -> bool:
        """Reap every child that exited (the keeper is the only one waiting for them); note the server's status.
        Whether any had: a process that just exited is not yet a quiet tree."""
        reaped = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return reaped
            if pid == 0:
                return reaped
            reaped = True
            if pid == self.server:
                self.status = status

    def _stop_tree(self, grace: float) -> None:
        """Everything below the keeper stopped (``stop_tree``)."""
        me = os.getpid()
        stop_tree(lambda table: descendants(me, table), self._reap, grace)


def exit_as(status: int) -> None:
    """End this process as a process with wait status ``status`` ended: with its code, or by its signal."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to take back
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else CANNOT_START)


def main(arguments: list[str]) -> None:
    """``keeper.py CONTROL_FD REPORT_FD LOCALE PATH PROGRAM [ARG...]``: ``REPORT_FD``, the write end of the pipe
    where a start's failure is told (its ``errno``); ``LOCALE``, ``=VALUE`` the server's own ``LC_CTYPE``, ``-`` none:
    Python's locale coercion (PEP 538), which ``-I`` does not stop, sets one in the keeper's environment."""
    if len(arguments) < 5 or not (arguments[0].isdigit() and arguments[1].isdigit()):
        sys.stderr.write("usage: keeper.py CONTROL_FD REPORT_FD LOCALE PATH PROGRAM [ARG...]\n")
        os._exit(2)
    control, report = int(arguments[0]), int(arguments[1])
    os.set_blocking(control, False)
    os.set_inheritable(report, False)  # closed by the server's exec: the report's end is the start's success
    with contextlib.suppress(BlockingIOError):
        if not os.read(control, 512):  # groundstate is gone already: nothing to start, nothing to keep
            os._exit(CANNOT_START)
    environment = dict(os.environ)
    if arguments[2].startswith("="):
        environment["LC_CTYPE"] = arguments[2][1:]
    else:
        environment.pop("LC_CTYPE", None)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    # its descriptors (the control pipe's read end) are no other process's to open through /proc: a server of the
    # same user that held a write end of its own would keep the keeper waiting after groundstate's end — and should
    # it get one all the same, groundstate's death is also told by a signal
    prctl(PR_SET_DUMPABLE, 0)
    keeper = Keeper(control, report)
    parent = os.getppid()
    prctl(PR_SET_PDEATHSIG, int(ORPHANED))
    if os.getppid() != parent or parent == 1:  # gone already, before the signal could be asked for
        keeper.orphaned.append(int(ORPHANED))
    keeper.start(arguments[3], arguments[4:], environment)
    status = keeper.serve()
    sys.stderr.flush()
    exit_as(status)


if __name__ == "__main__":
    main(sys.argv[1:])
