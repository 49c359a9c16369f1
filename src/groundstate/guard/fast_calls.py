"""``tools/call`` over stdio answered by the guard itself, without the SDK's server in between.

The SDK's server puts every request through a dispatcher, a middleware chain, memory streams and per-version
validation before the guard's handler sees it; in front of an upstream that answers at once, that was about as much
as the whole direct call (docs/benchmarks.md, "The MCP guard"). Here a client's line is looked at first: a
well-formed ``tools/call`` of a session whose handshake is done — the one request a guard serves thousands of times
— is answered by ``Guard.answer`` and written straight to the wire; a cancellation of such a call cancels it. Every
other line, and any ``tools/call`` this path does not take whole (malformed parameters, a duplicate id, before
``notifications/initialized``), goes to the SDK's server as before, which answers it as it always did.

What the client controls here: the whole line. It is parsed with ``safejson`` (bounded nesting: the transport
already rewrote what it could not read) and its parameters validated by the SDK's own model before anything is
taken; what the guard does with a call is unchanged — the same ``Guard.answer`` the SDK's handler calls.

The answer is shaped as the SDK's server shapes it: the result dumped by its model, then sieved to the protocol
version the handshake settled on (``mcp_types.methods``). Only a session that shook hands in the handshake era takes
this path; a client of the 2026 era, which sends no ``initialize``, is served by the SDK alone, and so is a session
once any request carries that era's envelope (``_meta["io.modelcontextprotocol/…"]``). A line holding an escape is
always parsed whole (``notifications\\/cancelled`` is that method too); a message carrying ``result`` or ``error``,
or a request named like a notification, is never taken for one. A client that closes its end of the wire ends the
session: nothing more is forwarded for nobody to read.

A call's answer is written once, never after the client cancelled it. When the client's input ends, calls still
running get ``EOF_GRACE_SEC`` to finish (the SDK's server cancelled them at once, so that a client that wrote its
requests and closed its end lost their answers); then they are cancelled and answered "Connection closed" (-32000),
as the SDK's server answers them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, TypeGuard

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from .. import safejson
from .callers import Caller, client_name

CONNECTION_CLOSED = -32000
EOF_GRACE_SEC = 5.0
INTERNAL_ERROR = -32603
_WATCHED = ("tools/call", "notifications/cancelled", "initialize")  # a line without any of these (or an escape) is
# the SDK's
ENVELOPE = "io.modelcontextprotocol/"  # _meta keys of the 2026 era's request envelope


class FastCalls:
    """The stdio session's ``tools/call`` requests, taken off the client's lines and answered here."""

    def __init__(
        self,
        answer: Callable[[Caller, types.CallToolRequestParams], Awaitable[types.CallToolResult]],
        write: Callable[[str, bool], Awaitable[None]],
        gone: Callable[[], bool] = lambda: False,
        transport: str = "stdio",
    ) -> None:
        self._answer, self._write, self._gone, self._transport = answer, write, gone, transport
        self._client = client_name("", transport, None)
        self._version = ""  # the protocol version the handshake settled on
        self._ready = False  # the client said notifications/initialized (and never sent the 2026 envelope)
        self._modern = False  # a request carried the 2026 era's envelope: the SDK serves this session alone
        self._running: dict[tuple[type, Any], asyncio.Task[None]] = {}
        self._withdrawn: weakref.WeakSet[asyncio.Task[None]] = weakref.WeakSet()  # cancelled by the client
        self._answering: weakref.WeakSet[asyncio.Task[None]] = weakref.WeakSet()  # began writing their answer

    async def passed_on(self, lines: AsyncIterable[str]) -> AsyncIterator[str]:
        """``lines`` without those taken here, until they end or the client stops reading the answers (then the
        session ends: nobody would read what a call does); then the calls still running are answered."""
        try:
            async for line in lines:
                if self._gone():
                    break
                if not self.took(line):
                    yield line
        finally:
            await self.close()

    def took(self, line: str) -> bool:
        """Whether ``line`` is handled here: a ``tools/call`` taken, or the cancellation of one."""
        if "\\" not in line and not any(word in line for word in _WATCHED):  # (escapes can spell any name)
            return False
        try:
            message = safejson.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "result" in message \
                or "error" in message:  # fmt: skip
            return False
        method, params, number = message.get("method"), message.get("params"), message.get("id")
        meta = params.get("_meta") if isinstance(params, dict) else None  # as sent: the model renames its keys
        if isinstance(meta, dict) and any(isinstance(key, str) and key.startswith(ENVELOPE) for key in meta):
            self._modern, self._ready = True, False  # the 2026 era: not this path's to serve
            return False
        if method == "initialize":  # the SDK answers it; the version it settles on and the client's name are kept
            params = params if isinstance(params, dict) else {}
            info = params.get("clientInfo")
            self._client = client_name(info.get("name") if isinstance(info, dict) else "", self._transport, None)
            asked = params.get("protocolVersion")
            self._version = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
            self._ready = False
            return False
        if "id" in message:  # a request; a notification has no id
            if method != "tools/call" or not self._ready or not _is_id(number) or _key(number) in self._running:
                return False
        elif method == "notifications/initialized":
            self._ready = bool(self._version) and not self._modern
            return False
        elif method == "notifications/cancelled":
            return self._cancel(params.get("requestId") if isinstance(params, dict) else None)
        else:
            return False
        try:  # as the SDK's server checks it: the version's surface, then the handler's model
            methods.validate_client_request("tools/call", self._version, params)
            typed = types.CallToolRequestParams.model_validate({} if params is None else params, by_name=False)
        except (ValidationError, KeyError):
            return False  # the SDK's server answers it as it always did
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        caller = Caller("stdio", self._client, None, self._progress(token) if _is_id(token) else None)
        key = _key(number)
        task = asyncio.get_running_loop().create_task(self._run(number, caller, typed))
        self._running[key] = task
        task.add_done_callback(lambda _: self._running.pop(key, None))  # also when cancelled before it ran
        return True

    def _cancel(self, number: Any) -> bool:
        task = self._running.get(_key(number)) if _is_id(number) else None
        if task is None:
            return False
        self._withdrawn.add(task)
        task.cancel()
        return True

    async def _run(self, number: str | int, caller: Caller, params: types.CallToolRequestParams) -> None:
        reply: dict[str, Any]
        this = asyncio.current_task()
        wait = True
        try:
            result = await self._answer(caller, params)
            dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            reply = {"result": methods.serialize_server_result("tools/call", self._version, dumped)}
        except MCPError as exc:
            error = {"code": exc.error.code, "message": exc.error.message}
            reply = {"error": error if exc.error.data is None else {**error, "data": exc.error.data}}
        except asyncio.CancelledError:
            if this in self._withdrawn:  # the client cancelled it: the spec forbids an answer
                return
            reply = {"error": {"code": CONNECTION_CLOSED, "message": "Connection closed"}}
            # cancelled because the session ends (close): written without waiting, as close() writes its own —
            # waiting would hold the guard open for a client that stopped reading (nothing cancels it again)
            wait = False
        except Exception as exc:  # a fault of the guard's: this call's error, one line on stderr, never a traceback
            print(f"groundstate mcp guard: tools/call {params.name[:200]!r} failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)  # fmt: skip
            reply = {"error": {"code": INTERNAL_ERROR, "message": f"the guard failed: {type(exc).__name__}: {exc}"}}
        if this is not None:
            self._answering.add(this)
        await self._send({"jsonrpc": "2.0", "id": number, **reply}, wait)

    def _progress(self, token: str | int) -> Callable[[float, str], Awaitable[None]]:
        async def report(waited: float, message: str) -> None:
            await self._send({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": token, "progress": waited, "message": message}})  # fmt: skip

        return report

    async def _send(self, message: dict[str, Any], wait: bool = True) -> None:
        """One message on the wire — waiting while the client reads slowly, unless not ``wait`` — in UTF-8 where
        it can be, ``\\u`` escapes where a lone surrogate (a client's own request id) cannot be written so."""
        try:
            text = safejson.dumps_line(message, compact=True)
        except ValueError as exc:  # NaN or infinity in an upstream's result: JSON cannot carry it
            text = json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "error": {
                "code": INTERNAL_ERROR, "message": f"the answer cannot be written as JSON: {exc}"}})  # fmt: skip
        with contextlib.suppress(ConnectionError, OSError):  # the client went away: nobody to answer
            await self._write(text + "\n", wait)

    async def close(self) -> None:
        """The client's input ended: the calls still running get ``EOF_GRACE_SEC`` to finish (a client that wrote
        its requests and closed its end may still read the answers), then are cancelled — a held call withdrawn —
        and answered "Connection closed" without waiting for a client that no longer reads."""
        running = dict(self._running)
        if not running:
            return
        _, late = await asyncio.wait(running.values(), timeout=EOF_GRACE_SEC)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)
        for (_, number), task in running.items():
            if task.cancelled() and task not in self._withdrawn and task not in self._answering:  # it never ran
                await self._send({"jsonrpc": "2.0", "id": number,
                                  "error": {"code": CONNECTION_CLOSED, "message": "Connection closed"}},
                                 wait=False)  # fmt: skip


def _is_id(value: object) -> TypeGuard[str | int]:
    """Whether ``value`` can be a JSON-RPC id or progress token: text or an integer (``true`` is no integer here)."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def _key(number: Any) -> tuple[type, Any]:
    """A request id as a key: 1 and "1" are two ids."""
    return (type(number), number)
