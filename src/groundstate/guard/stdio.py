"""The guard's stdio transport with a nesting bound on what it reads.

The MCP SDK parses each line with a recursive parser; a line nested a few hundred levels deep, holding a lone
surrogate or a number of thousands of digits fails to parse and the SDK answers nothing (it cannot know the
request's id), so the client waits forever. Here every line is measured first (``safejson``'s linear scan, and a
cheap scan for surrogate escapes and long digit runs); one the SDK could not read is not handed to it as sent: its
outer fields are read from a flattened copy and, for a request, it becomes a ``tools/call`` of ``TOO_DEEP`` with the
same id, which the guard refuses with a message saying why — so every request gets its answer. A notification that deep
is dropped with one line on stderr.

The descriptors are claimed as the SDK does for itself (it skips that for explicit streams): fd 0 points at the null
device and fd 1 at stderr while serving, so upstream servers and tools started meanwhile can neither read the
client's messages nor write into the wire.

When the wire is a pipe, a socket or a terminal (what an MCP client gives its server), it is read and written on the
event loop (``PipeLines``, ``PipeWire``) rather than through a worker thread per line read and two per line written,
as ``anyio.wrap_file`` does: those three hops were a third of what the guard added to a call (docs/benchmarks.md,
"The MCP guard"). A regular file (``groundstate mcp serve < requests.jsonl``) keeps the threaded file.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import select
import stat
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio

from .. import safejson
from ..providers import READ_SIZE, LineTooLong, pipe_lines

TOO_DEEP = "groundstate/too-deep"  # the tool name a too-deep request is answered under (refused by the guard)


class BoundedLines:
    """The client's lines, each one the SDK can parse: too-deep requests rewritten, too-deep notifications dropped."""

    def __init__(self, lines: Any) -> None:
        self._lines = lines

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            deep = line.count("[") + line.count("{") > safejson.MAX_DEPTH and safejson.depth(line) > safejson.MAX_DEPTH
            if not deep and (_SUSPECT.search(line) is None or not _unreadable(line)):
                yield line
                continue
            answer = _answerable(line)
            if answer is None:
                sys.stderr.write("groundstate: dropped a message nested deeper than "
                                 f"{safejson.MAX_DEPTH} levels (a notification, or without an id)\n")  # fmt: skip
                continue
            yield answer


_DIGITS = re.compile(r"[0-9]{1000}")
_SUSPECT = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[0-9]{1000}")  # a surrogate escape, a thousand digits


def _unreadable(line: str) -> bool:
    """Whether the SDK's parser would drop ``line`` without an answer: a lone surrogate (``"\\ud800"``, which a
    model can write in its tool-call JSON) or a number of a thousand digits or more. Only lines the cheap
    ``_SUSPECT`` scan flags get here."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # Python's own limit on an integer's digits, or not JSON at all
        return _DIGITS.search(line) is not None
    return any(safejson.unwritable(item) or _huge(item) for item in safejson.leaves(value))


def _huge(item: object) -> bool:
    """An integer of more than ~900 digits, which the SDK's parser refuses."""
    return isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 3000


def _answerable(line: str) -> str | None:
    """A shallow ``tools/call`` of TOO_DEEP with the request's id, or None when the line has no usable id."""
    try:
        outer = json.loads(safejson.flattened(line))
    except ValueError:
        return None
    request_id = outer.get("id") if isinstance(outer, dict) else None
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return None
    method = str(outer.get("method", ""))[:100]
    params = {"name": TOO_DEEP, "arguments": {"method": method}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}) + "\n"


class PipeLines:
    """The client's lines, read from the pipe on the event loop (``providers.pipe_lines``)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def __aiter__(self) -> AsyncIterator[str]:
        try:
            async for line in pipe_lines(self._reader):
                yield line
        except LineTooLong as exc:  # the session ends as if the client had closed its end, and says why
            print(f"groundstate mcp guard: the client wrote {exc}; its input is no longer read", file=sys.stderr,
                  flush=True)  # fmt: skip


class PipeWire:
    """The writing end of the wire on the event loop: ``write`` hands the text to the pipe (what it cannot take at
    once is buffered), ``flush`` waits while that buffer is over its limit (a client reading slowly holds the
    guard's answers, not its loop). Once the client has closed its end (``gone``), what is written is dropped."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def gone(self) -> bool:
        """Whether the client closed its end of the pipe (nothing written reaches it any more)."""
        return self._writer.transport.is_closing()

    async def write(self, text: str) -> None:
        if not self.gone():
            self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        if not self.gone():
            with contextlib.suppress(ConnectionError):
                await self._writer.drain()

    async def send(self, text: str, wait: bool = True) -> None:
        """One whole message, written in one piece (answers written at once never interleave), then — if ``wait``
        — flushed."""
        await self.write(text)
        if wait:
            await self.flush()

    async def close(self) -> None:
        """Every answer written, then the pipe closed: at most ``CLOSE_WAIT_SEC`` for a client that stopped
        reading, whose pipe is then dropped; even while the guard is being cancelled."""
        self._writer.close()
        with anyio.move_on_after(CLOSE_WAIT_SEC, shield=True):
            with contextlib.suppress(OSError, RuntimeError):
                await self._writer.wait_closed()
        if not self._writer.transport.is_closing() or self._writer.transport.get_write_buffer_size():
            self._writer.transport.abort()


CLOSE_WAIT_SEC = 5.0


class FileWire:
    """The writing end of the wire when it is a regular file (which the event loop cannot watch): each write in a
    worker thread, under one lock, so that the SDK's answers and the guard's own never interleave."""

    def __init__(self, text: io.TextIOWrapper) -> None:
        self._text, self._lock = text, threading.Lock()

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self._locked, self._text.write, text)

    async def flush(self) -> None:
        await anyio.to_thread.run_sync(self._locked, self._text.flush)

    def gone(self) -> bool:
        """A file is never closed by its reader."""
        return False

    async def send(self, text: str, wait: bool = True) -> None:
        """One whole message, written and flushed (``wait`` changes nothing: a file does not wait for a reader)."""
        await anyio.to_thread.run_sync(self._sent, text)

    def close(self) -> None:
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._text.flush()

    def _locked(self, step: Any, *arguments: Any) -> None:
        with self._lock:
            step(*arguments)

    def _sent(self, text: str) -> None:
        with self._lock:
            self._text.write(text)
            self._text.flush()


def _pipe_like(fd: int) -> bool:
    """Whether the event loop can watch ``fd``: a pipe, a socket or a character device (a terminal) that the
    system's poller accepts — ``/dev/null`` is a character device epoll refuses, and a refusal would come later, in
    the loop's own callback, leaving the guard waiting for input that never comes."""
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    poller = getattr(select, "epoll", None)
    if poller is None:
        return True
    with poller() as probe:
        try:
            probe.register(fd, select.EPOLLIN)
        except OSError:
            return False
    return True


@contextlib.asynccontextmanager
async def claimed_stdio() -> AsyncIterator[tuple[BoundedLines, PipeWire | FileWire]]:
    """(the client's bounded lines, the wire's writer) over private copies of fd 0 and 1, with fd 0 on the null
    device and fd 1 on stderr until the block ends."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    # the readers and writers own copies: a pipe's transport closes its own at the end of input
    reading, writing = os.fdopen(os.dup(wire_in), "rb", buffering=0), os.fdopen(os.dup(wire_out), "wb", buffering=0)
    loop = asyncio.get_running_loop()
    read_transport: asyncio.BaseTransport | None = None
    wire: PipeWire | FileWire | None = None
    try:
        if _pipe_like(wire_in):
            reader = asyncio.StreamReader(limit=READ_SIZE, loop=loop)
            read_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop), reading)  # fmt: skip
            lines: Any = PipeLines(reader)
        else:
            lines = anyio.wrap_file(io.TextIOWrapper(io.BufferedReader(reading), encoding="utf-8", errors="replace"))
        if _pipe_like(wire_out):
            sink, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, writing)
            wire = PipeWire(asyncio.StreamWriter(sink, protocol, None, loop))
        else:
            wire = FileWire(io.TextIOWrapper(io.BufferedWriter(writing), encoding="utf-8"))
        yield BoundedLines(lines), wire
    finally:
        if isinstance(wire, PipeWire):
            await wire.close()
        elif isinstance(wire, FileWire):
            wire.close()
        if read_transport is not None:
            read_transport.close()
        for name in (reading, writing):  # closed once: a transport that closes it later finds it closed
            with contextlib.suppress(OSError, ValueError):
                name.close()
        os.dup2(wire_in, 0)  # the wire back where it was
        os.dup2(wire_out, 1)
        for fd in (0, 1):  # the loop made the shared descriptions non-blocking
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
        os.close(wire_in)
        os.close(wire_out)
