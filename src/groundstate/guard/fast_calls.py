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
this path; a client of the 2026 era, which sends no ``initialize``, is served by the SDK alone.

A call's answer is written once, never after the client cancelled it. When the client's input ends, calls still
running get ``EOF_GRACE_SEC`` to finish (the SDK's server cancelled them at once, so that a client that wrote its
requests and closed its end lost their answers); then they are cancelled and answered "Connection closed" (-32000),
as the SDK's server answers them."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any

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
_WATCHED = ("tools/call", "notifications/cancelled", "initialize")  # a line without any of these is the SDK's


class FastCalls:
    """The stdio session's ``tools/call`` requests, taken off the client's lines and answered here."""

    def __init__(
        self,
        answer: Callable[[Caller, types.CallToolRequestParams], Awaitable[types.CallToolResult]],
        write: Callable[[str], Awaitable[None]],
        transport: str = "stdio",
    ) -> None:
        self._answer, self._write, self._transport = answer, write, transport
        self._client = client_name("", transport, None)
        self._version = ""  # the protocol version the handshake settled on
        self._ready = False  # the client said notifications/initialized
        self._running: dict[tuple[type, Any], asyncio.Task[None]] = {}
        self._withdrawn: set[tuple[type, Any]] = set()  # cancelled by the client: never answered

    async def passed_on(self, lines: AsyncIterable[str]) -> AsyncIterator[str]:
        """``lines`` without those taken here; when they end, the calls still running are cancelled and answered."""
        try:
            async for line in lines:
                if not self.took(line):
                    yield line
        finally:
            await self.close()

    def took(self, line: str) -> bool:
        """Whether ``line`` is handled here: a ``tools/call`` taken, or the cancellation of one."""
        if not any(word in line for word in _WATCHED):
            return False
        try:
            message = safejson.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return False
        method, params = message.get("method"), message.get("params")
        if method == "initialize":  # the SDK answers it; the version it settles on and the client's name are kept
            params = params if isinstance(params, dict) else {}
            info = params.get("clientInfo")
            self._client = client_name(info.get("name") if isinstance(info, dict) else "", self._transport, None)
            asked = params.get("protocolVersion")
            self._version = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
            self._ready = False
            return False
        if method == "notifications/initialized":
            self._ready = bool(self._version)
            return False
        if method == "notifications/cancelled":
            return self._cancel(params.get("requestId") if isinstance(params, dict) else None)
        if method != "tools/call" or not self._ready:
            return False
        number = message.get("id")
        if not isinstance(number, str | int) or isinstance(number, bool) or _key(number) in self._running:
            return False
        try:  # as the SDK's server checks it: the version's surface, then the handler's model
            methods.validate_client_request("tools/call", self._version, params)
            typed = types.CallToolRequestParams.model_validate({} if params is None else params, by_name=False)
        except (ValidationError, KeyError):
            return False  # the SDK's server answers it as it always did
        meta = params.get("_meta") if isinstance(params, dict) else None  # as sent: the model renames its keys
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        report = self._progress(token) if isinstance(token, str | int) and not isinstance(token, bool) else None
        caller = Caller("stdio", self._client, None, report)  # progress notifications only when asked for
        key = _key(number)
        task = asyncio.get_running_loop().create_task(self._run(number, caller, typed))
        self._running[key] = task
        task.add_done_callback(lambda _: self._forget(key))  # also when cancelled before it ran
        return True

    def _forget(self, key: tuple[type, Any]) -> None:
        self._running.pop(key, None)
        self._withdrawn.discard(key)

    def _cancel(self, number: Any) -> bool:
        task = self._running.get(_key(number)) if _is_id(number) else None
        if task is None:
            return False
        self._withdrawn.add(_key(number))
        task.cancel()
        return True

    async def _run(self, number: str | int, caller: Caller, params: types.CallToolRequestParams) -> None:
        key = _key(number)
        reply: dict[str, Any]
        try:
            result = await self._answer(caller, params)
            dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            reply = {"result": methods.serialize_server_result("tools/call", self._version, dumped)}
        except MCPError as exc:
            error = {"code": exc.error.code, "message": exc.error.message}
            reply = {"error": error if exc.error.data is None else {**error, "data": exc.error.data}}
        except asyncio.CancelledError:
            if key in self._withdrawn:  # the client cancelled it: the spec forbids an answer
                return
            reply = {"error": {"code": CONNECTION_CLOSED, "message": "Connection closed"}}
        except Exception as exc:  # a fault of the guard's: this call's error, one line on stderr, never a traceback
            print(f"groundstate mcp guard: tools/call {params.name[:200]!r} failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)  # fmt: skip
            reply = {"error": {"code": INTERNAL_ERROR, "message": f"the guard failed: {type(exc).__name__}: {exc}"}}
        await self._send({"jsonrpc": "2.0", "id": number, **reply})

    def _progress(self, token: str | int) -> Callable[[float, str], Awaitable[None]]:
        async def report(waited: float, message: str) -> None:
            await self._send({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": token, "progress": waited, "message": message}})  # fmt: skip

        return report

    async def _send(self, message: dict[str, Any]) -> None:
        try:
            text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except ValueError as exc:  # NaN or infinity in an upstream's result: JSON cannot carry it
            text = json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "error": {
                "code": INTERNAL_ERROR, "message": f"the answer cannot be written as JSON: {exc}"}})  # fmt: skip
        await self._write(text + "\n")

    async def close(self) -> None:
        """The client's input ended: the calls still running get ``EOF_GRACE_SEC`` to finish (a client that wrote
        its requests and closed its end may still read the answers), then are cancelled — a held call withdrawn —
        and answered "Connection closed"."""
        running = dict(self._running)
        if not running:
            return
        _, late = await asyncio.wait(running.values(), timeout=EOF_GRACE_SEC)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)
        for (_, number), task in running.items():
            if task.cancelled():  # cancelled before it ran: it could not answer for itself
                await self._send({"jsonrpc": "2.0", "id": number,
                                  "error": {"code": CONNECTION_CLOSED, "message": "Connection closed"}})  # fmt: skip


def _is_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _key(number: Any) -> tuple[type, Any]:
    """A request id as a key: 1 and "1" are two ids."""
    return (type(number), number)
