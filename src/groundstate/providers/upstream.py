"""The gateway's hop to its upstream: one pooled HTTP client whose response parser is compiled (aiohttp's).

The gateway relays every chunk of every streamed reply, so what a chunk costs on this hop is what the gateway adds
to a stream. Through httpx (its HTTP/1.1 parser, h11, is pure Python) a chunk cost ~25 µs and a request ~0.3 ms
to set up — most of the gateway's added latency and the reason it reached 41–48% of a direct stream's throughput
at 100 concurrent streams (bench/gateway, docs/benchmarks.md). Here a reply's body is read as the bytes arrive,
already de-chunked and never decompressed (``Accept-Encoding: identity`` is asked for, so the relayed bytes are
the upstream's own and the metrics parse text, not gzip).

The upstream is not trusted: its status line, headers and body framing go through the client's bounded parser;
whatever it breaks — an unreachable host, a refused TLS handshake, a reply that stops mid-body, headers too long, a
read that stalls past the timeout — is one ``UpstreamFailure`` naming the cause, which the gateway answers with a
502 (or, mid-stream, by ending the stream).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TypeVar
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
from yarl import URL

from ..errors import UpstreamFailed
from .client import tls_context
from .http_wire import Exchange, WireFailure, WirePool, address

CONNECT_SECONDS = 30.0  # as the providers' client: a host that does not answer in this long is unreachable
READ_SECONDS = 300.0  # between two reads of one reply: a local model may think that long before its first token
T = TypeVar("T")


class UpstreamFailure(UpstreamFailed):
    """The upstream could not be reached or broke off; the message names the transport's error."""

    code = "upstream_unreachable"


class ReplyTooLarge(UpstreamFailure):
    """A reply that had to be read whole (to be judged) was larger than the gateway reads."""


class ReadWatch:
    """A reply's read timeout, kept by one timer per reply instead of the client library's ``sock_read``, which
    cancels and re-arms a timer on every piece received (about a twentieth of the gateway's CPU for a stream that
    arrives a chunk at a time). When the timer fires it looks whether a read has been waited on for ``seconds``:
    then the reading task is cancelled and the wait raises ``TimeoutError``; otherwise the timer is set again for
    the first moment that could be so (never, while nothing is waited on). Only time spent waiting for the upstream
    counts: the time its reader spends elsewhere (relaying to a slow client) does not."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._since: float | None = None  # when the read waited on now began
        self._timer: asyncio.TimerHandle | None = None
        self._expired = False

    def __enter__(self) -> ReadWatch:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        return self

    def __exit__(self, *_: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def waiting(self, read: Awaitable[T]) -> T:
        """``read``'s result, or ``TimeoutError`` once it has been waited on for the watch's seconds."""
        self._since = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_at(self._since + self._seconds, self._check)
        try:
            return await read
        except asyncio.CancelledError:
            if not self._expired:
                raise
            self._expired = False
            if self._task is not None:
                self._task.uncancel()  # the cancellation was this watch's own: not the caller's to see
            raise TimeoutError from None
        finally:
            self._since = None

    def _check(self) -> None:
        self._timer = None
        if self._since is None or self._task is None:
            return  # nothing waited on: the next read sets the timer again
        due = self._since + self._seconds
        if self._loop.time() >= due:
            self._expired = True
            self._task.cancel()
        else:
            self._timer = self._loop.call_at(due, self._check)


class UpstreamReply:
    """A reply being received: status, headers (repeated ones kept), and its body as it arrives (``take``: the
    bytes that arrived since the last take, waiting for some; b"" at the body's end)."""

    def __init__(
        self, status: int, raw_headers: list[tuple[bytes, bytes]], take: Callable[[], Awaitable[bytes]],
        read_seconds: float = READ_SECONDS, drained: Callable[[], bool] = lambda: False,
    ) -> None:  # fmt: skip
        if not 200 <= status <= 599:  # a final 1xx (a 101 switch) or a status HTTP has no class for
            raise UpstreamFailure(f"sent a malformed reply (status {status})")
        self._take = take
        self.drained = drained
        """Whether the body has ended and all of it was taken: the piece just given was the last (False when
        unknown). The gateway then writes that piece and the reply's end to its client as one write."""
        self._read_seconds = read_seconds
        self.status_code = status
        self.raw_headers = raw_headers  # as sent: any byte a value holds
        self.headers: list[tuple[str, str]] = [(name.decode("utf-8", "surrogateescape"),
                                                value.decode("utf-8", "surrogateescape"))
                                               for name, value in raw_headers]  # fmt: skip

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (each piece whatever arrived since the last: chunks that came together
        are one); ``UpstreamFailure`` ("timed out") once the upstream sends nothing for ``read_seconds`` while it
        is waited for — the time a slow client takes to accept what was relayed is not the upstream's
        (``ReadWatch``)."""
        with ReadWatch(self._read_seconds) as watch:
            while True:
                try:
                    data = await watch.waiting(self._take())
                except WireFailure as exc:
                    raise UpstreamFailure(str(exc)) from exc
                except (TimeoutError, aiohttp.ClientError) as exc:
                    raise _failure(exc) from exc
                if not data:
                    return
                yield data

    async def read(self, limit: int) -> bytes:
        """The whole body, refused past ``limit`` bytes (``ReplyTooLarge``): the upstream decides how much it
        sends, and a body read whole before it is judged must not hold the gateway's memory at its will."""
        held = bytearray()
        async for data in self.chunks():
            held += data
            if len(held) > limit:
                raise ReplyTooLarge(f"the reply is larger than {limit} bytes, the most this gateway reads whole")
        return bytes(held)


class Upstream:
    """Requests to one upstream over a pool of kept-alive connections, created in the loop that first uses it."""

    def __init__(self, connect_seconds: float = CONNECT_SECONDS, read_seconds: float = READ_SECONDS) -> None:
        # each read of a reply's body is timed by its ReadWatch, the wait for its head here (request)
        self._timeout = aiohttp.ClientTimeout(total=None, connect=connect_seconds, sock_read=None)
        self._read_seconds = read_seconds
        self._connect_seconds = connect_seconds
        self._wire: WirePool | None = None
        self._wire_loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}

    def _open(self) -> aiohttp.ClientSession:
        """The pool of this loop (a pool's connections belong to the loop that opened them; one left behind by a
        closed loop is dropped with it)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            self._loop = loop
            connector = aiohttp.TCPConnector(ssl=tls_context(), limit=0)  # no cap: every client stream gets its hop
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                auto_decompress=False,  # relayed as sent
                trust_env=False,  # proxies from the environment are read here (proxy_for): see there why
                skip_auto_headers=("User-Agent",),  # the client's own User-Agent is forwarded instead
            )
        return self._session

    @asynccontextmanager
    async def request(
        self, method: str, url: str | URL, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[UpstreamReply]:
        """An ``UpstreamReply`` for the request, open while the block runs (``url``: a ``URL`` is sent as it is
        encoded, a string is normalised by the HTTP library)."""
        sent = {**headers, "Accept-Encoding": "identity"}
        proxy = self._proxy_for(str(url))
        if proxy is None:
            async with self._on_the_wire(method, URL(url) if isinstance(url, str) else url, body, sent) as reply:
                yield reply
            return
        try:
            async with asyncio.timeout(self._read_seconds) as head_due, self._open().request(
                method, url, data=body, headers=sent, allow_redirects=False, proxy=proxy
            ) as response:
                head_due.reschedule(None)  # the head came in time; each read of the body is timed on its own
                raw = list(response.raw_headers)
                yield UpstreamReply(response.status, raw, response.content.readany, self._read_seconds,
                                    response.content.at_eof)  # fmt: skip
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _failure(exc) from exc

    @asynccontextmanager
    async def _on_the_wire(
        self, method: str, url: URL, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[UpstreamReply]:
        """The exchange without a proxy, on the gateway's own HTTP/1.1 hop (``http_wire``): the connection goes
        back to the pool after a complete reply that keeps it alive, and is closed on any other way out."""
        pool = self._pool()
        exchange: Exchange | None = None
        try:
            async with asyncio.timeout(self._connect_seconds) as due:
                exchange = await pool.exchange(method, url, body, headers)
                due.reschedule(asyncio.get_running_loop().time() + self._read_seconds)  # then the head's wait
                await exchange.head
            if method == "HEAD":
                exchange.bodiless()
            yield UpstreamReply(exchange.status, exchange.raw_headers, exchange.take, self._read_seconds,
                                exchange.drained)  # fmt: skip
        except WireFailure as exc:
            raise UpstreamFailure(str(exc)) from exc
        except TimeoutError as exc:
            raise _failure(exc) from exc
        except BaseException:
            if exchange is not None:
                exchange.close()
            raise
        else:
            pool.release(exchange, address(url))
        finally:
            if exchange is not None and not exchange.reusable():
                exchange.close()

    def _pool(self) -> WirePool:
        """The pool of this loop (a connection belongs to the loop that opened it)."""
        loop = asyncio.get_running_loop()
        if self._wire is None or self._wire_loop is not loop:
            self._wire, self._wire_loop = WirePool(tls_context()), loop
        return self._wire

    def _proxy_for(self, url: str) -> str | None:
        """The proxy the environment names for ``url``'s scheme (``HTTP_PROXY``, ``HTTPS_PROXY``), unless ``NO_PROXY``
        covers its host — read once per scheme and host. Read here rather than by the client library's
        ``trust_env``, which would also send ``~/.netrc`` credentials for the upstream's host with every request
        that came without an ``Authorization`` of its own: a client of the gateway would be signed in as whoever
        runs it (and one that sent its own would get an error instead of an answer)."""
        parts = urlsplit(url)
        key = (parts.scheme, parts.hostname or "")
        if key not in self._proxies:
            proxy = getproxies().get(parts.scheme)
            self._proxies[key] = proxy if proxy and parts.hostname and not proxy_bypass(parts.hostname) else None
        return self._proxies[key]

    async def close(self) -> None:
        """Close the pooled connections."""
        if self._wire is not None:
            self._wire.close()
            self._wire = None
        if self._session is not None:
            await self._session.close()
            self._session = None


def _failure(exc: BaseException) -> UpstreamFailure:
    """The transport's error in words that say what happened (the client library's class name is no reason)."""
    if isinstance(exc, aiohttp.ClientSSLError):
        what = "the TLS handshake failed"
    elif isinstance(exc, aiohttp.ClientConnectorError):
        what = f"cannot connect ({exc.os_error.strerror or type(exc.os_error).__name__})"
    elif isinstance(exc, TimeoutError):
        what = "timed out"
    elif isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        what = "broke off before the reply was complete"
    elif isinstance(exc, aiohttp.ClientResponseError):
        what = f"sent a malformed reply ({exc.message})"
    else:
        what = str(exc).strip() or type(exc).__name__
    return UpstreamFailure(what)


__all__ = ["Upstream", "UpstreamFailure", "UpstreamReply"]
