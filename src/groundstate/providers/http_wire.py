"""The gateway's upstream hop spoken at the protocol level: one HTTP/1.1 exchange per ``Exchange``, read by a
compiled parser (httptools, the one uvicorn uses) straight from the socket's reads.

Why not the pooled client library alone: a streamed model answer is a hundred or more HTTP chunks, and aiohttp's
client takes five Python calls per chunk (``data_received``, ``feed_data``, ``end_http_chunk_receiving``, a read
and ``resume_reading``) and about 0.2 ms to set up a request — at 100 concurrent streams a third of the gateway's
CPU (docs/benchmarks.md). Here a read of the socket is one ``data_received``; the parser hands each chunk's bytes to
a list append, and the relay takes everything that arrived since its last look in one piece.

The upstream is not trusted: every byte of its head, framing and timing is the attacker's here. What this refuses,
each an ``UpstreamFailure`` naming it: a head longer than ``MAX_HEAD`` bytes, anything the parser rejects (a
malformed status line, header, chunk size), a switch of protocols, a reply that ends before its framing says it
is complete. A connection goes back to the pool only after a complete reply that keeps it alive, with nothing
after it; anything else closes it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from typing import cast

import httptools
from yarl import URL

from ..errors import UpstreamFailed

MAX_HEAD = 64 * 1024  # bytes of status line and headers (aiohttp allowed 8,190 per line)
BUFFERED = 256 * 1024  # bytes received and not yet taken before the socket is no longer read
IDLE_SECONDS = 4.0  # a pooled connection idle longer is closed, not reused: servers close theirs (uvicorn after 5 s)
# kept-alive connections kept per upstream; past them a finished one is closed. As many as a busy gateway carries
# streams at once: at 100 concurrent streams a cap of 64 had a third of them connect (and close) anew every round
MAX_IDLE = 256


class WireFailure(UpstreamFailed):
    """The exchange failed; the message says how (the gateway names the upstream around it)."""

    code = "upstream_unreachable"


class Exchange(asyncio.Protocol):
    """One connection to an upstream and the reply being read on it. ``head`` resolves when the status line and
    headers are in; ``take`` gives the body's bytes as they arrive."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpResponseParser(self)
        # a control byte in a header's value (no server may send one on) is the gateway's to drop, not a reason to
        # lose the reply (gateway._relayed_headers); a line still ends only at CRLF, and the framing is read strictly
        self._parser.set_dangerous_leniencies(lenient_headers=True)
        self.transport: asyncio.Transport | None = None
        self.head: asyncio.Future[None] = self._loop.create_future()
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.status = 0
        self._head_bytes = 0  # bytes read while no head was complete, over all reads
        self._head_size = 0  # bytes of status texts and headers parsed before the head, counted as they are
        self._pieces: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._failure: WireFailure | None = None
        self.complete = False  # the reply's framing said it ended
        self.lost = False
        self._after_end = False  # bytes came after the reply's end: the connection cannot be reused
        self._keep_alive = False  # the complete reply asked to keep the connection (HTTP/1.1 without "close")
        self.idle_since = 0.0

    # -- the socket ------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, though not always asyncio's class: uvloop's (which uvicorn runs on when it is
        # installed) subclasses none of them — an isinstance check here failed every request with a 500
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.complete:  # nothing belongs after a reply: an upstream that sends it is not spoken to again
            self._after_end = True
            return
        if not self.head.done():
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self.complete:  # bytes after a complete reply that do not parse: the reply stands, the connection
                self._after_end = True  # is not reused
                self.close()
                return
            if isinstance(exc, httptools.HttpParserUpgrade):
                self._fail(WireFailure("sent a malformed reply (it switched protocols)"))
            elif isinstance(exc.__context__, WireFailure):  # raised by a callback below
                self._fail(exc.__context__)
            else:
                self._fail(WireFailure(f"sent a malformed reply ({exc})"))
        else:
            if not self.head.done() and self._head_bytes > MAX_HEAD:
                self._fail(WireFailure(f"sent a malformed reply (a head longer than {MAX_HEAD} bytes)"))
            elif self._pieces:
                self._wake()
        if self._buffered > BUFFERED and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        return None  # the transport closes itself; connection_lost says what it means

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.complete:
            return
        if self.head.done() and not self._framed():  # a body that ends with the connection: this is its end
            self.complete = True
            self._wake()
            return
        self._fail(WireFailure("broke off before the reply was complete"))

    # -- the parser's callbacks ------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.complete:  # a second reply in the same read: not asked for, so not read
            self._after_end = True
            return
        self.raw_headers = []
        self._counted(16)  # a status line's own bytes, at least (interim replies count too)

    def on_status(self, text: bytes) -> None:
        if not self.head.done():
            self._counted(len(text))

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head.done():
            self._counted(len(name) + len(value) + 4)
            self.raw_headers.append((name, value))

    def _counted(self, size: int) -> None:
        """A head's bytes as the parser reads them: a head that arrives whole in one read is bounded too."""
        self._head_size += size
        if self._head_size > MAX_HEAD:
            raise WireFailure(f"sent a malformed reply (a head longer than {MAX_HEAD} bytes)")

    def on_headers_complete(self) -> None:
        if self.head.done():  # a second reply's head
            return
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # an interim reply (100 Continue, 103 Early Hints): the real
            return  # one follows on the same connection
        self.status = status
        if not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self.complete:
            return
        self._pieces.append(body)  # the reader is woken once per read of the socket (data_received), not per chunk
        self._buffered += len(body)

    def on_message_complete(self) -> None:
        if not self.head.done() or self.complete:  # the end of an interim reply, or of a second one
            return
        self.complete = True
        self._keep_alive = self._parser.should_keep_alive()  # asked now: once the reply ends the parser forgets
        self._wake()

    # -- the reader ------------------------------------------------------------------------------------
    async def take(self) -> bytes:
        """The body's bytes that arrived since the last take (waiting for some), b"" once the reply is complete."""
        while not self._pieces:
            if self._failure is not None:
                raise self._failure
            if self.complete:
                return b""
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces)
        self._pieces.clear()
        self._buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    def drained(self) -> bool:
        """Whether the reply is complete and every byte of its body was taken."""
        return self.complete and not self._pieces and self._failure is None

    def bodiless(self) -> None:
        """The reply to a HEAD request: its head says how long a body would be, and none follows. Nothing more is
        read, and the connection is not reused (the parser cannot be told that no body comes)."""
        self.complete = True
        self._after_end = True

    def reusable(self) -> bool:
        """Whether the connection may carry another request: the reply complete and read, the upstream asking to
        keep it, nothing after the reply, the socket open."""
        return (self.complete and not self._pieces and not self.lost and not self._after_end
                and self._failure is None and self._keep_alive and self.transport is not None
                and not self.transport.is_closing())  # fmt: skip

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _framed(self) -> bool:
        """Whether the reply says where its body ends (a length or chunks); otherwise the connection's end does."""
        names = {name.rstrip(b" \t").lower() for name, _ in self.raw_headers}  # as the lenient parser reads them
        return b"content-length" in names or b"transfer-encoding" in names or self.status in (204, 304)

    def _fail(self, failure: WireFailure) -> None:
        if self._failure is None:
            self._failure = failure
        self._pieces.clear()  # nothing parsed in the read that failed is given on
        if not self.head.done():
            self.head.set_exception(failure)
        self._wake()
        self.close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class WirePool:
    """Kept-alive connections per upstream address (scheme, host, port), opened in the loop that uses them."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        self._tls = tls
        self._idle: dict[tuple[str, str, int], list[Exchange]] = {}
        self._sweep: asyncio.TimerHandle | None = None  # closes what has been idle too long, while any is kept

    async def exchange(self, method: str, url: URL, body: bytes, headers: Mapping[str, str]) -> Exchange:
        """A connection with the request written on it (a fresh ``Exchange`` reading its reply)."""
        exchange = await self._connect(address(url))
        lines = [f"{method} {url.raw_path_qs or '/'} HTTP/1.1", f"Host: {url.host_port_subcomponent}"]
        for name, value in headers.items():
            if "\r" in name or "\n" in name or "\r" in value or "\n" in value or ":" in name:
                exchange.close()
                raise WireFailure(f"refused to send a header that would break the request's framing ({name!r})")
            lines.append(f"{name}: {value}")
        lines.append(f"Content-Length: {len(body)}")
        try:
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "strict")
        except UnicodeEncodeError as exc:
            exchange.close()
            raise WireFailure("refused to send a header that is not Latin-1 text") from exc
        assert exchange.transport is not None
        exchange.transport.write(head + body)
        return exchange

    async def _connect(self, key: tuple[str, str, int]) -> Exchange:
        now = time.monotonic()
        idle = self._idle.get(key)
        while idle:
            kept = idle.pop()
            if kept.reusable() and kept.transport is not None and now - kept.idle_since < IDLE_SECONDS:
                fresh = Exchange()  # a new reply on the kept socket: the protocol object is the reply's reader
                fresh.transport = kept.transport
                kept.transport.set_protocol(fresh)
                return fresh
            kept.close()
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await loop.create_connection(
                Exchange, host, port, ssl=self._tls if scheme == "https" else None,
                server_hostname=host if scheme == "https" else None)  # fmt: skip
        except ssl.SSLError as exc:
            raise WireFailure(f"the TLS handshake failed ({exc.reason or exc})") from exc
        except OSError as exc:
            raise WireFailure(f"cannot connect ({exc.strerror or type(exc).__name__})") from exc
        return protocol

    def release(self, exchange: Exchange, key: tuple[str, str, int]) -> None:
        """The exchange is over: its connection kept for the next request if it may be (at most ``MAX_IDLE`` per
        upstream), closed otherwise."""
        idle = self._idle.setdefault(key, [])
        if not exchange.reusable() or len(idle) >= MAX_IDLE:
            exchange.close()
            return
        exchange.idle_since = time.monotonic()
        idle.append(exchange)
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(IDLE_SECONDS, self._swept)

    def _swept(self) -> None:
        """Close the connections idle for ``IDLE_SECONDS`` (or broken meanwhile); look again while any is kept."""
        self._sweep = None
        now = time.monotonic()
        for key, idle in list(self._idle.items()):
            kept = [exchange for exchange in idle if exchange.reusable() and now - exchange.idle_since < IDLE_SECONDS]
            for exchange in idle:
                if exchange not in kept:
                    exchange.close()
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]
        if self._idle:
            self._sweep = asyncio.get_running_loop().call_later(IDLE_SECONDS, self._swept)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for idle in self._idle.values():
            for exchange in idle:
                exchange.close()
        self._idle.clear()


def address(url: URL) -> tuple[str, str, int]:
    """The pool's key for ``url``."""
    return url.scheme, url.raw_host or "", url.port or (443 if url.scheme == "https" else 80)
