"""A stdio MCP server spoken to directly: the process started, its JSON-RPC lines written and read on the event loop.

The SDK's client session puts every message through a dispatcher, two memory streams and model validation on each
side; in front of an upstream that answers at once, that was about a third of what the guard added to a forwarded
call (docs/benchmarks.md, "The MCP guard"). A guard or a workflow agent needs four things of an upstream —
``initialize``, ``tools/list`` (every page), ``tools/call``, and an answer to the server's ``ping`` — so this client
does exactly those, and keeps what the SDK guarantees about the process:

- it is started in a session of its own, with only the SDK's safe environment (``HOME``, ``LOGNAME``, ``PATH``,
  ``SHELL``, ``TERM``, ``USER``) plus the server's configured ``env``: the guard's own variables (a provider key)
  never reach it;
- stopping it closes its stdin, waits ``EXIT_GRACE_SEC``, then terminates its process group and kills what is left
  — and any process it started that moved to a session of its own — even when the task stopping it is being
  cancelled.

What the server controls — every byte it writes — is data: a line that is not JSON, nested too deep, or a response
no request waits for is skipped; a result that is not a ``CallToolResult``, or holds a lone surrogate, fails that
call alone; a line past ``MAX_LINE`` bytes ends the session (its calls fail, nothing more is read); a request is
written only as fast as the server reads, and its ``ping`` answered only while it reads the answers; the server's own
requests other than ``ping`` are answered "method not found"; its end of the pipe closing fails every waiting call
with ``UpstreamClosed``. A call whose caller is cancelled is cancelled at the server too
(``notifications/cancelled``)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TextIO

import anyio

from .. import safejson
from ..errors import GroundstateError
from .keeper import descendants, signal_if_same
from .lines import READ_SIZE, LineTooLong, pipe_lines
from .server_processes import identified, killed_with_parent

HANDSHAKE_VERSION = "2025-11-25"  # what initialize asks for: the newest version of the handshake era
SPOKEN_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # what a server may answer with
SAFE_ENVIRONMENT = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")  # inherited, as the SDK's client does
EXIT_GRACE_SEC = 2.0  # a server's time to leave once its stdin closes, then again once terminated
KEEPER = str(Path(__file__).with_name("keeper.py"))  # run as a script: see keeper.py
KEEPING = sys.platform.startswith("linux")  # where a keeper can adopt what its server leaves (a child subreaper)
METHOD_NOT_FOUND = -32601
EXIT_NOTICE_SEC = 1.0  # how long a server whose output ended is given to exit, so its waiting calls say it did
EXIT_POLL_SEC = 0.2  # how often a server is looked at for having exited (while its output may stay open)
MAX_UNREAD = 1 << 20  # bytes of answers to the server's own requests left unread, past which it is answered no more
_LEADING_ID = re.compile(r'\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(\d{1,18})\s*,')  # an id written first
CLIENT_INFO = {"name": "groundstate", "version": "1"}


class UpstreamClosed(GroundstateError):
    """The server's output ended (it exited or closed it) while a request waited for its answer."""


class UpstreamRefused(GroundstateError):
    """The server answered a request with a JSON-RPC error, or with a result that is not what the method returns."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def safe_environment(configured: dict[str, str] | None) -> dict[str, str]:
    """The environment a server starts with: the safe variables that are set (not shell functions), then its own."""
    found = {key: value for key in SAFE_ENVIRONMENT
             if (value := os.environ.get(key)) is not None and not value.startswith("()")}  # fmt: skip
    return {**found, **(configured or {})}


class StdioSession:
    """One running stdio server: requests by id, their answers matched as they arrive."""

    def __init__(self, process: asyncio.subprocess.Process, name: str, control: int | None = None) -> None:
        self.process, self.name = process, name
        self._control = control  # the write end of its keeper's control pipe (None: no keeper), closed once stopped
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._closed: BaseException | None = None
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self._exit_watch = asyncio.get_running_loop().create_task(self._watch_exit())

    async def initialize(self) -> dict[str, Any]:
        """The handshake: the server's answer (its version checked), then ``notifications/initialized``."""
        answer = await self.request("initialize", {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {},
                                                   "clientInfo": CLIENT_INFO})  # fmt: skip
        version = answer.get("protocolVersion") if isinstance(answer, dict) else None
        if version not in SPOKEN_VERSIONS:
            raise UpstreamRefused(-32602, f"the server {self.name} speaks MCP version {str(version)[:40]!r}, not one "
                                          f"of {', '.join(SPOKEN_VERSIONS)}")  # fmt: skip
        await self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return dict(answer)

    async def list_tools(self) -> Any:
        """Every tool the server lists, all pages read (a ``ListToolsResult``)."""
        import mcp_types as types

        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(10_000):  # a server that pages forever is not waited on forever
            page = types.ListToolsResult.model_validate(await self.request("tools/list",
                                                                           {"cursor": cursor} if cursor else {}))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return types.ListToolsResult(tools=tools)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """The tool's result (a ``CallToolResult``); the server's JSON-RPC error raises ``UpstreamRefused``."""
        import mcp_types as types
        from pydantic import ValidationError

        answer = await self.request("tools/call", {"name": name, "arguments": arguments})
        try:
            return types.CallToolResult.model_validate(answer)
        except ValidationError as exc:
            raise UpstreamRefused(-32603, f"the server {self.name} answered tools/call with something that is not a "
                                          f"tool result: {exc.errors()[0]['msg'] if exc.errors() else exc}") from None

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send one request and wait for its answer's ``result``."""
        if self._closed is not None:
            raise UpstreamClosed(f"the server {self.name} is gone: {self._closed}")
        number = next(self._ids)
        waiting: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[number] = waiting
        try:
            await self._write({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
            return await waiting
        except asyncio.CancelledError:
            answered = waiting.done() and not waiting.cancelled()  # (cancelling the caller cancels its future)
            if not answered and self._closed is None:  # the caller gave up: the server may stop too
                self._answer({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": number, "reason": "the caller cancelled the request"}})  # fmt: skip
            raise
        finally:
            self._waiting.pop(number, None)

    async def _write(self, message: dict[str, Any]) -> None:
        """Send one message, waiting while the server's input is full (a server that stops reading holds this
        call, not the guard's memory)."""
        try:
            self._send(message)
            assert self.process.stdin is not None
            await self.process.stdin.drain()
        except (UpstreamClosed, ConnectionError) as exc:
            raise await self._why_unwritable(exc) from None

    async def _why_unwritable(self, failed: BaseException) -> UpstreamClosed:
        """Why a request could not be written: its exit, if the server is exiting (found in CI: a server that died
        at once was reported as "no longer reads its input" on a machine slow enough for the write to come first)."""
        exited = await self._exiting()
        if exited is not None:
            return exited
        if isinstance(failed, UpstreamClosed):
            return failed
        return UpstreamClosed(f"the server {self.name} no longer reads its input ({failed})")

    async def _exiting(self) -> UpstreamClosed | None:
        """The server's exit, if it comes within ``EXIT_NOTICE_SEC``: a server's output or input mostly ends as it
        exits, and then its exit is the news."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.process.wait()), EXIT_NOTICE_SEC)
        return None if self.process.returncode is None else self._exited()

    def _exited(self) -> UpstreamClosed:
        return UpstreamClosed(f"the server {self.name} exited (status {self.process.returncode})")

    def _send(self, message: dict[str, Any]) -> None:
        stdin = self.process.stdin
        if stdin is None or stdin.is_closing():
            raise UpstreamClosed(f"the server {self.name} no longer reads its input")
        stdin.write(safejson.dumps_line(message, compact=True).encode("utf-8") + b"\n")

    async def _read(self) -> None:
        assert self.process.stdout is not None
        reason: BaseException = UpstreamClosed(f"the server {self.name} closed its output")
        try:
            async for line in pipe_lines(self.process.stdout):
                self._take(line)
            reason = await self._exiting() or reason
        except LineTooLong as exc:
            reason = UpstreamClosed(f"the server {self.name} wrote {exc}: its output is no longer read")
        except (OSError, ValueError) as exc:
            reason = UpstreamClosed(f"reading the server {self.name} failed: {exc}")
        finally:
            self._fail(reason)

    async def _watch_exit(self) -> None:
        """A server that exits while a process it started keeps its output open (a daemon inherited it) ends its
        output for nobody: its requests would wait for answers that never come — a start for all of
        ``mcp.start_timeout_sec``, then "did not start". Once it has exited (and what it wrote before is read),
        they fail saying so."""
        while self.process.returncode is None:
            await asyncio.sleep(EXIT_POLL_SEC)
        await asyncio.sleep(EXIT_POLL_SEC)
        self._fail(self._exited())

    def _fail(self, reason: BaseException) -> None:
        """No more requests, and those waiting fail with ``reason`` (the first reason found stays)."""
        if self._closed is None:
            self._closed = reason
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(self._closed)

    def _take(self, line: str) -> None:
        """One line from the server: an answer handed to its request, a ``ping`` answered, anything else skipped."""
        if not line.strip():
            return
        try:
            message = safejson.loads(line)
        except (ValueError, RecursionError):
            self._unreadable(line)
            return
        if not isinstance(message, dict):
            return
        number, method = message.get("id"), message.get("method")
        if safejson.lone_surrogates(line, message):  # no UTF-8 can carry it: the answer it is in fails, unread
            if isinstance(number, int) and (waiting := self._waiting.get(number)) is not None and not waiting.done():
                waiting.set_exception(UpstreamRefused(-32603, f"the server {self.name} answered with a lone surrogate "
                                                              "(text no UTF-8 can carry)"))  # fmt: skip
            return
        if isinstance(method, str):
            if number is not None and isinstance(number, str | int) and not isinstance(number, bool):
                if method == "ping":
                    self._answer({"jsonrpc": "2.0", "id": number, "result": {}})
                else:
                    self._answer({"jsonrpc": "2.0", "id": number,
                                  "error": {"code": METHOD_NOT_FOUND, "message": f"groundstate does not answer "
                                                                                 f"{method[:100]}"}})  # fmt: skip
            return  # a notification: logging, progress, list changes — nothing the caller waits for
        waiting = self._waiting.get(number) if isinstance(number, int) and not isinstance(number, bool) else None
        if waiting is None or waiting.done():
            return
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            code = code if isinstance(code, int) and not isinstance(code, bool) else -32603
            waiting.set_exception(UpstreamRefused(code, str(error.get("message", "no message"))[:2000]))
        elif "result" in message:
            waiting.set_result(message["result"])

    def _unreadable(self, line: str) -> None:
        """A line ``safejson`` will not read whole (nested too deep, a number of a thousand digits): if it is an
        answer, the request it answers fails saying why — found by an attack, where a result nested 64 levels deep
        was skipped and its call waited for ever. Its id is looked for with the standard parser (which reads deeper),
        then among its outer fields alone (``safejson.flattened``: one linear scan, wherever the id stands); a line
        that still cannot be read is answered by its id when the id leads the line. A line that names no request of
        ours (a stray print, the server's own requests) is skipped."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # past even the standard parser (thousands of levels, a number of
            try:  # thousands of digits): its outer fields, wherever they stand — what is nested replaced unread
                message = json.loads(safejson.flattened(line, 1))  # (found by an attack: an answer that wrote its
            except (ValueError, RecursionError):  # id after a result of thousands of levels waited for ever)
                leading = _LEADING_ID.match(line[:200])  # or not JSON at all: the id, if it leads
                message = {"id": int(leading.group(1))} if leading else None
        number = message.get("id") if isinstance(message, dict) else None
        if not isinstance(number, int) or isinstance(number, bool) or isinstance(message.get("method"), str):
            return  # no answer of ours (noise, a request or a notification from the server): skipped
        waiting = self._waiting.get(number)
        if waiting is not None and not waiting.done():
            waiting.set_exception(UpstreamRefused(-32603, f"the server {self.name} answered with a message that "
                                                          "cannot be read whole (nested too deep, or a number too "
                                                          "long): it is not passed on"))  # fmt: skip

    def _answer(self, message: dict[str, Any]) -> None:
        """Send what nobody waits on (an answer to the server, a cancellation): a server gone meanwhile is no error,
        and one that asks without reading the answers (a ``ping`` flood) is answered no more once ``MAX_UNREAD``
        bytes of them wait."""
        stdin = self.process.stdin
        if stdin is not None and stdin.transport.get_write_buffer_size() > MAX_UNREAD:
            return
        with contextlib.suppress(UpstreamClosed, OSError):
            self._send(message)

    async def stop(self) -> None:
        """Close its stdin, give it ``EXIT_GRACE_SEC``, then terminate and at last kill its process group — and
        whatever it started that left the group (``setsid``), which the group's signals miss."""
        process = self.process
        below = identified(descendants(process.pid)) if process.returncode is None else {}
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        for signalled in (None, signal.SIGTERM, signal.SIGKILL):
            if signalled is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signalled)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), EXIT_GRACE_SEC)
                break
        if process.returncode is not None:  # the leader is gone: so is what it left in its group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        for pid, started in below.items():  # what is left of its tree, in whatever session it moved to — each
            signal_if_same(pid, started, signal.SIGKILL)  # only if still the process seen, not a pid given again
        for task in (self._reader, self._exit_watch):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        transport = getattr(process, "_transport", None)  # asyncio's; closed here, while the loop runs: its pipe
        if transport is not None:  # may still be open in a daemon killed later, and closing it then, at the
            transport.close()  # interpreter's exit, printed "Exception ignored … Event loop is closed"
        if self._control is not None:  # the keeper's work is done (or, killed with its group, it has none left)
            with contextlib.suppress(OSError):
                os.close(self._control)
            self._control = None


async def _started(command: list[str], environment: dict[str, str],
                   errlog: TextIO | None) -> tuple[asyncio.subprocess.Process, int | None]:
    """The server ``command`` started in a session of its own — under its keeper where there is one (Linux: see
    ``keeper.py``), with the write end of the keeper's control pipe, which only this process holds; elsewhere
    directly, killed with the thread that started it."""
    pipes: dict[str, Any] = {"stdin": asyncio.subprocess.PIPE, "stdout": asyncio.subprocess.PIPE, "stderr": errlog,
                             "env": environment, "start_new_session": True, "limit": READ_SIZE}  # fmt: skip
    program, *arguments = command
    if not KEEPING:
        return await asyncio.create_subprocess_exec(program, *arguments, preexec_fn=killed_with_parent(),
                                                    **pipes), None  # fmt: skip
    path = executable(program, environment)
    control, held = os.pipe()  # both ends close on exec; the keeper is handed its ends alone
    told, report = os.pipe()
    locale = "=" + environment["LC_CTYPE"] if "LC_CTYPE" in environment else "-"  # see keeper.main
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", KEEPER, str(control), str(report), locale, path, program, *arguments,
            pass_fds=(control, report), **pipes)  # fmt: skip
    except BaseException:
        os.close(held)
        raise
    finally:
        os.close(control)
        os.close(report)
    try:
        failed = await _start_report(told)  # its end: the server's exec succeeded
    except BaseException:  # cancelled meanwhile (the start timed out, the guard stops): stopped as any server is
        with anyio.CancelScope(shield=True):
            await StdioSession(process, command[0], held).stop()
        raise
    if failed:  # the server could not be started: the error exec gave, as starting it directly would raise it
        os.close(held)
        await process.wait()
        number = int(failed) if failed.isdigit() else errno.ENOEXEC
        raise OSError(number, os.strerror(number), program)
    return process, held


async def _start_report(descriptor: int) -> str:
    """What the keeper's report pipe ``descriptor`` says before its end (its write ends are closed by the server's
    exec, or once the keeper wrote why the start failed): empty when the server started. Read on the loop, so that
    whoever waits for the start can be cancelled; the descriptor is closed."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_SIZE)
    try:
        pipe = os.fdopen(descriptor, "rb", buffering=0)
    except BaseException:
        os.close(descriptor)
        raise
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        return (await reader.read(64)).decode("ascii", errors="replace").strip()
    finally:
        transport.close()


def executable(program: str, environment: dict[str, str]) -> str:
    """Where ``program`` is: as named when it names a path, else found on the server's ``PATH`` as starting it
    would find it (``FileNotFoundError`` when it is on none). Whether it can be run is for ``exec`` to say."""
    if "\0" in program:
        raise ValueError("embedded null byte")
    found = program if os.sep in program else shutil.which(program, path=environment.get("PATH", os.defpath))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return found


@contextlib.asynccontextmanager
async def stdio_session(
    name: str, command: list[str], env: dict[str, str] | None, errlog: TextIO | None
) -> AsyncIterator[StdioSession]:
    """The server ``command`` running for as long as the block does (stopped after it, whatever ends it)."""
    process, control = await _started(command, safe_environment(env), errlog)
    session = StdioSession(process, name, control)
    try:
        yield session
    finally:
        with anyio.CancelScope(shield=True):  # a start timed out, the guard stops: the server is stopped all the same
            await session.stop()
