"""Newline-delimited messages read from a pipe on the event loop — MCP's stdio framing, for the guard's client side
and its upstreams alike.

A line may be far longer than a read (asyncio's ``readline`` fails past its 64 KiB buffer); it is decoded as
UTF-8 with an invalid byte replaced (U+FFFD), so a malformed byte never stops the stream; the last line is yielded
even without its newline. A line past ``MAX_LINE`` bytes ends the stream (``LineTooLong``): a sender that never
writes a newline would otherwise hold the reader's memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ..errors import LimitError

READ_SIZE = 1 << 16
MAX_LINE = 64 << 20  # bytes of one message: past it, the sender is cut off (a line that never ends held memory)


class LineTooLong(LimitError):
    """A line longer than the bound: the rest of the stream cannot be read as messages."""


async def pipe_lines(reader: asyncio.StreamReader, limit: int = MAX_LINE) -> AsyncIterator[str]:
    """Each line ``reader`` gives, newline included, until it ends; ``LineTooLong`` once a line passes ``limit``
    bytes without its newline."""
    pending = bytearray()
    while True:
        chunk = await reader.read(READ_SIZE)
        if not chunk:
            break
        start = len(pending)
        pending += chunk
        taken, cut = 0, pending.find(b"\n", start)
        while cut >= 0:
            yield pending[taken : cut + 1].decode("utf-8", errors="replace")
            taken = cut + 1
            cut = pending.find(b"\n", taken)
        del pending[:taken]
        if len(pending) > limit:
            raise LineTooLong(f"a line longer than {limit} bytes without its end")
    if pending:
        yield pending.decode("utf-8", errors="replace")
