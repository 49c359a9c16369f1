"""Newline-delimited messages read from a pipe on the event loop — MCP's stdio framing, for the guard's client side
and its upstreams alike.

A line is as long as its sender makes it (asyncio's ``readline`` would fail past its buffer limit, and the threaded
readers before did not); it is decoded as UTF-8 with an invalid byte replaced (U+FFFD), so a malformed byte never
stops the stream; the last line is yielded even without its newline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

READ_SIZE = 1 << 16


async def pipe_lines(reader: asyncio.StreamReader) -> AsyncIterator[str]:
    """Each line ``reader`` gives, newline included, until it ends."""
    pending = bytearray()
    while True:
        chunk = await reader.read(READ_SIZE)
        if not chunk:
            break
        start = len(pending)
        pending += chunk
        cut = pending.find(b"\n", start)
        if cut < 0:
            continue
        taken = 0
        while cut >= 0:
            yield pending[taken : cut + 1].decode("utf-8", errors="replace")
            taken = cut + 1
            cut = pending.find(b"\n", taken)
        del pending[:taken]
    if pending:
        yield pending.decode("utf-8", errors="replace")
