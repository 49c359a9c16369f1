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
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio

from .. import safejson

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
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 3000:
            return True
    return False


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


@contextlib.contextmanager
def claimed_stdio() -> Iterator[tuple[BoundedLines, Any]]:
    """(the client's bounded lines, the wire's writer) over private copies of fd 0 and 1, with fd 0 on the null
    device and fd 1 on stderr until the block ends."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = io.TextIOWrapper(os.fdopen(wire_in, "rb"), encoding="utf-8", errors="replace")
    writer = io.TextIOWrapper(os.fdopen(wire_out, "wb"), encoding="utf-8")
    try:
        yield BoundedLines(anyio.wrap_file(reader)), anyio.wrap_file(writer)
    finally:
        with contextlib.suppress(OSError, ValueError):
            writer.flush()
        os.dup2(reader.buffer.fileno(), 0)
        os.dup2(writer.buffer.fileno(), 1)
        reader.close()
        writer.close()
