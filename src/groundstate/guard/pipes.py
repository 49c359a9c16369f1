"""The guard's stdin and stdout as asyncio pipes, for the ``mcp`` SDK's stdio server.

The SDK reads each line and writes and flushes each message through a worker thread (``anyio.wrap_file``): three
thread hops per call, a third of the guard's added latency (bench/mcp). These two objects do the same on the event
loop. What the SDK's own transport guarantees is kept: while serving, fd 0 reads the null device and fd 1 goes to
stderr, so a tool's stray ``print`` cannot corrupt the wire; both are restored on exit. A line longer than
``MAX_LINE`` (what a hostile client could send to exhaust memory) is skipped whole and handed on as a line that is
not JSON, which the SDK reports as a parse error without stopping the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator

MAX_LINE = 64 * 1024 * 1024  # one JSON-RPC message, as bytes
NOT_JSON = "\x00 a message longer than the guard accepts was skipped\n"


class Lines:
    """``async for line in Lines(reader)``: each line as text (UTF-8, undecodable bytes replaced)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> Lines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:  # the last line had no newline, or there is none left
            if not end.partial:
                raise StopAsyncIteration from None
            line = end.partial
        except asyncio.LimitOverrunError as over:  # longer than MAX_LINE: skip all of it
            await self._skip(over.consumed)
            return NOT_JSON
        return line.decode("utf-8", errors="replace")

    async def _skip(self, consumed: int) -> None:
        """Drop ``consumed`` bytes (none of them a newline), then everything up to and including the next one."""
        while True:
            try:
                await self.reader.readexactly(consumed)
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as over:
                consumed = over.consumed
            except asyncio.IncompleteReadError:
                return


class Writer:
    """``await writer.write(text)`` and ``await writer.flush()``, as the SDK calls them."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        """Queue ``text`` on the pipe."""
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Wait until the pipe has taken what was queued."""
        await self.writer.drain()


@contextlib.asynccontextmanager
async def stdio_pipes() -> AsyncIterator[tuple[Lines, Writer] | None]:
    """The process's stdin and stdout as ``(Lines, Writer)``; None when they are not pipes, sockets or terminals
    (a regular file, say), where the SDK's own threaded transport is used instead."""
    loop = asyncio.get_running_loop()
    private_in, private_out = os.dup(0), os.dup(1)
    reading = os.fdopen(private_in, "rb", buffering=0)
    writing = os.fdopen(private_out, "wb", buffering=0)
    transports: list[asyncio.BaseTransport] = []
    try:
        reader = asyncio.StreamReader(limit=MAX_LINE)
        read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), reading)
        transports.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, writing)
        transports.append(write_transport)
    except (ValueError, OSError):  # not a pipe: nothing was diverted yet
        for transport in transports:
            transport.close()
        reading.close()
        writing.close()
        yield None
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()  # what was printed before serving keeps going where it went
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # while serving: a child or a tool reads nothing from the wire ...
    os.close(null)
    os.dup2(2, 1)  # ... and what it prints goes to stderr, not into the wire
    try:
        yield Lines(reader), Writer(asyncio.StreamWriter(write_transport, protocol, None, loop))
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()  # what a tool printed and Python still buffers goes to stderr too, not the wire
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
        for transport in transports:
            transport.close()
