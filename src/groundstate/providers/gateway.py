"""The gateway: an HTTP proxy clients point their SDK at.

It forwards each request to the upstream, returns the upstream's response to the client unchanged, and
publishes each response as SIGIL frames (one stream id per response) on a ZMQ PUB socket, with HTTP errors
as classified UPSTREAM_ERROR frames. With ``upstream="local"`` it serves the local model behind an
OpenAI-compatible ``/v1/chat/completions`` endpoint instead, publishing the model's real token ids.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import itertools
import re
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, quote, unquote, urlsplit, urlunsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from yarl import URL

from .. import long_lived, safejson, tracing
from ..errors import AuthenticationError, GroundstateError, http_problem
from ..wire import ByteVocabulary, Mode
from . import gated, local_tools
from .adapter import MAX_EVENT
from .apis import UnknownAPI, provider_api
from .bridge import MUTED, SigilBridge, checked_hold
from .chat_request import ChatRequest, ChatRequestError, parse_chat_request
from .errors import MAX_ERROR_BODY, REQUEST, SERVER, ErrorRecord, classify
from .in_band import WholeEvents, event_end
from .metrics import ProviderMetrics
from .normalized import ErrorEvent, Usage
from .openai_wire import (
    PathRefused,
    RequestTooLarge,
    UnknownPath,
    models_list,
    send_error,
    send_json,
    stream_answer,
    usage,
)
from .server_processes import SHUTDOWN_GRACE_SEC
from .upstream import Upstream, UpstreamFailure, UpstreamReply
from .whole_reply import MAX_REPLY_BYTES, reply_usage

if TYPE_CHECKING:
    from .local import LocalModel

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
# a hop's own headers, never relayed: RFC 9110's connection-specific ones, the framing, and ``expect`` (a client's
# ``100-continue`` made the upstream hop wait for an interim answer an upstream need not send: 30 s and more)
_HOP_BY_HOP = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding", "keep-alive", "te",
               "trailer", "upgrade", "proxy-connection", "proxy-authorization", "proxy-authenticate", "expect"}
_NOT_A_TOKEN = re.compile(rb"[^!#$%&'*+\-.^_`|~0-9A-Za-z]")  # a header name is a token (RFC 9110 5.1)
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # no control byte but a tab in a header value


METRICS_PATH = "/metrics"
HELD_FOR_METRICS = 1 << 20  # a reply's bytes kept to parse after it was relayed (beyond: parsed as they pass)
NO_BODY = (204, 304)  # statuses whose reply has no body: nothing can be told in it
METRICS_BATCH = 32  # events of a relayed reply read for the metrics between two turns of the event loop
MAX_MODEL_LABELS = 64  # distinct model names a client may add to the metrics; later ones are counted as "other"
PUBLISH_HOLD_SEC = 0.005  # a published frame's text may wait this long for more (bridge.py; --publish-hold-ms):
# less than a third of a 60 Hz display's frame, and a fast provider's tokens gather by the dozen
MAX_PUBLISH_HOLD_SEC = 1.0  # a subscriber waits at most a second for held text: beyond, a "live" stream is not
MAX_BODY = 8 << 20  # bytes of a request body the gateway reads (8 MiB: a long conversation with tools fits)


def _too_deep(body: bytes) -> str | None:
    """Why a JSON body nested deeper than ``safejson.MAX_DEPTH`` is refused (a 400 naming the depth), or None. The
    gateway reads the model name and the ``stream`` flag of every body it forwards, and Python's parser recurses once
    per level: ``[[[[…`` a hundred thousand deep was a RecursionError and a 500. A body that is not JSON is not judged
    here (the upstream answers it)."""
    if body.count(b"[") + body.count(b"{") <= safejson.MAX_DEPTH or body.lstrip()[:1] not in (b"{", b"["):
        return None  # too few brackets to be too deep (the common case costs two counts), or not JSON
    try:
        found = safejson.depth(body.decode("utf-8"))
    except UnicodeDecodeError:
        return None
    if found <= safejson.MAX_DEPTH:
        return None
    return f"the request body is JSON nested {found} levels deep; at most {safejson.MAX_DEPTH} are accepted"


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@`` and its query by ``***``: an ``--upstream`` may carry
    credentials (``?key=``, ``?token=`` too), and the gateway's metrics labels, log lines and error bodies are read by
    people who must not learn them."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.username and not parts.password and "@" not in parts.netloc and not parts.query:
        return url
    host = parts.netloc.rpartition("@")[2]
    shown = f"***@{host}" if "@" in parts.netloc else host
    return urlunsplit((parts.scheme, shown, parts.path, "***" if parts.query else "", ""))  # a query may hold a key


class Gateway:
    """The proxy (or the local model's endpoint) as an ASGI application; ``GET /metrics`` serves its Prometheus
    metrics to a client whose bearer token ``metrics_reader`` accepts (an operator account that may see; to anyone
    when ``metrics_reader`` is None)."""

    def __init__(
        self,
        upstream: str,
        api: str = "openai-chat",
        publish: str | None = None,
        metrics_reader: Callable[[str], bool] | None = None,
        gate: gated.GateFactory | None = None,
        max_body: int = MAX_BODY,
        publish_hold: float = PUBLISH_HOLD_SEC,
    ) -> None:
        if upstream != "local":
            provider_api(api)  # an unknown API is refused here, naming the known ones
        if gate is not None and (upstream == "local" or api not in gated.GATED_APIS):
            raise UnknownAPI(f"the packet gate reads {', '.join(gated.GATED_APIS)} replies from an upstream; "
                             f"not {'the local model' if upstream == 'local' else api}")  # fmt: skip
        self.gate = gate  # each reply through a fresh packet gate (None: replies pass unchanged)
        self.max_body = max_body  # bytes of a request body, at most (beyond: 413, and the rest is never read)
        self.upstream, self.api = upstream.rstrip("/"), api
        self.shown_upstream = without_credentials(self.upstream)  # for labels, logs and error bodies
        # requests go to the upstream without its user:password, which is sent as the Authorization instead
        self._target, self._authorization = upstream_credentials(self.upstream)
        self.metrics_reader = metrics_reader
        self.registry = CollectorRegistry()
        self.metrics = ProviderMetrics(self.registry)
        self.requests = Counter("groundstate_gateway_requests", "Requests the gateway answered, by HTTP status.",
                                ["provider", "status"], registry=self.registry)  # fmt: skip
        self._models: set[str] = set()
        self.sender = None
        # seconds a published frame's text may wait for more (SigilBridge's hold): refused here, not as every
        # request's 500
        self.publish_hold = checked_hold(publish_hold, MAX_PUBLISH_HOLD_SEC, "the gateway's publish hold")
        self._releasing: set[SigilBridge] = set()  # bridges whose held frame has a release scheduled
        if publish:
            from ..wire import FrameSender

            self.sender = FrameSender(publish, "pub")
        self._streams = itertools.count(1)
        self._local: Any = None
        self._upstream = Upstream()  # one connection pool for all forwarded requests
        self._lock = asyncio.Lock()  # the local model generates one response at a time

    def publish(self, data: bytes) -> None:
        """Send SIGIL frames to the subscribers (when the gateway publishes)."""
        if self.sender is not None and data:
            self.sender.send(data)

    def publish_from(self, bridge: SigilBridge, data: bytes) -> None:
        """Publish ``data`` framed by ``bridge``, and see that what the bridge now holds is published when due — a
        stream that pauses (or a client that leaves) does not keep its last tokens from the subscribers."""
        self.publish(data)
        if not self.publish_hold:
            return
        wait = bridge.held_for()
        if wait is not None and bridge not in self._releasing:
            self._releasing.add(bridge)
            asyncio.get_running_loop().call_later(wait, self._release, bridge)

    def _release(self, bridge: SigilBridge) -> None:
        self._releasing.discard(bridge)
        self.publish(bridge.release())

    def _bridge(self, vocabulary: Any, **streams: Any) -> SigilBridge:
        """A response's bridge: its own stream id, holding its frames for ``publish_hold``."""
        return SigilBridge(vocabulary, next(self._streams), hold=self.publish_hold, **streams)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    long_lived.started()  # what the gateway started with: out of the collector's reach
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"] == METRICS_PATH and scope["method"] == "GET":
            await self._serve_metrics(scope, send)
            return
        body = await self._body(scope, receive, send)
        if body is None:
            return  # refused (413), or the client went away
        if (refusal := _too_deep(body)) is not None:
            status = await send_error(send, ChatRequestError(refusal))
            self.requests.labels(self.api if self.upstream != "local" else "local", str(status)).inc()
            return
        if not tracing.enabled():  # no span, and nothing computed for one
            await self._serve(scope, body, receive, send)
            return
        method, path = scope["method"], scope["path"]
        attributes = {"gen_ai.operation.name": "chat" if method == "POST" else "request", "http.request.method": method,
                      "url.path": path[:200], "gen_ai.provider.name": self.api if self.upstream != "local" else "local",
                      "server.address": self.shown_upstream}  # fmt: skip
        if method == "POST":
            attributes["gen_ai.request.model"] = self._model_label(body)
        with tracing.span(f"{attributes['gen_ai.operation.name']} {path[:100]}", attributes, kind="server"):
            await self._serve(scope, body, receive, send)

    async def _serve(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        if self.upstream == "local":
            await self._local_completion(scope, body, send)
        else:
            await self._forward(scope, body, receive, send)

    async def _body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The request body, read in one pass (its pieces kept in a list and joined once), or None after a 413: any
        page the operator's browser opens can POST to a loopback gateway, so the body is bounded by ``max_body``, and
        the bound is enforced before the bytes past it are read — a declared Content-Length over it is refused
        before any, and a body sent without one as soon as its pieces add up to more."""
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body:
            await self._too_large(send, f"declares {int(declared)} bytes")
            return None
        pieces: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            piece = message.get("body", b"")
            size += len(piece)
            if size > self.max_body:
                await self._too_large(send, f"has more than {self.max_body} bytes")
                return None
            pieces.append(piece)
            if not message.get("more_body"):
                return b"".join(pieces)

    async def _too_large(self, send: Send, what: str) -> None:
        refused = RequestTooLarge(f"the request body {what}; the gateway accepts at most {self.max_body} bytes")
        status = await send_error(send, refused)
        self.requests.labels(self.api if self.upstream != "local" else "local", str(status)).inc()

    # -- metrics -------------------------------------------------------------------------------------------
    async def _serve_metrics(self, scope: Scope, send: Send) -> None:
        headers = dict(scope["headers"])
        sent = headers.get(b"authorization", b"").decode("latin-1")
        bearer = sent.removeprefix("Bearer ").strip() if sent.startswith("Bearer ") else ""
        if self.metrics_reader is not None and not (bearer and self.metrics_reader(bearer)):
            missing = AuthenticationError("the metrics need an operator's token (Authorization: Bearer ...)")
            await send_error(send, missing)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", CONTENT_TYPE_LATEST.encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": generate_latest(self.registry)})

    def _model_label(self, body: bytes) -> str:
        """The request's model as a metrics label, ``API:MODEL@UPSTREAM``. The client names the model, so the
        number of distinct labels is bounded: past MAX_MODEL_LABELS, a new name is counted as ``other``."""
        try:
            named = safejson.loads(body).get("model") if body else None
        except (ValueError, AttributeError, UnicodeDecodeError):
            named = None
        model = named[:100] if isinstance(named, str) and named else "unknown"
        if model not in self._models and len(self._models) >= MAX_MODEL_LABELS:
            model = "other"
        self._models.add(model)
        return f"{self.api}:{model}@{self.shown_upstream}"

    def _scrubbed(self, text: str) -> str:
        """``text`` (an HTTP library's message may quote the URL) without the upstream's user and password."""
        return text.replace(self.upstream, self.shown_upstream) if self.upstream != self.shown_upstream else text

    # -- proxy ---------------------------------------------------------------------------------------------
    async def _forward(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        chosen = provider_api(self.api)
        adapter_type, provider = chosen.adapter, chosen.provider
        hop = _HOP_BY_HOP | connection_named(scope["headers"])
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
                   if k.decode("latin-1").lower() not in hop}  # fmt: skip
        if self._authorization is not None:  # the operator's credentials in --upstream, not the client's
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["Authorization"] = self._authorization
        try:
            url = forwarded_url(self._target, scope)
        except PathRefused as exc:
            self.requests.labels(self.api, str(await send_error(send, exc))).inc()
            return
        bridge = self._bridge(ByteVocabulary(), next_stream=self._streams.__next__) if self.sender else MUTED
        model = self._model_label(body) if scope["method"] == "POST" else None  # GET /v1/models is no model call
        relayed = Relayed(send)
        watch = ClientWatch(receive)
        try:
            await self._relay(scope, url, body, headers, relayed, bridge, model, provider, adapter_type)
        except asyncio.CancelledError:
            if not watch.left():  # the server gave up on this request (its shutdown grace ran out): the upstream
                await self._stopped(relayed, bridge, provider)  # is let go, a stream already begun is told why in
                return  # band, and the request ends here — not as a traceback of the server's
            left = ErrorRecord(REQUEST, provider, None, "client_gone",  # the upstream is not read (and paid for)
                               "the client went away mid-reply; the upstream request was cancelled", False, None, None)
            self.publish(bridge.push(ErrorEvent(left)) + bridge.end())  # any longer
            return
        except UpstreamFailure as exc:  # the upstream is unreachable, too slow, or broke off
            if watch.left():  # the client went away while the upstream failed: nobody to tell
                return
            reason = f"the upstream at {self.shown_upstream} failed: {self._scrubbed(str(exc))}"
            failure = UpstreamFailure(reason)
            self.requests.labels(self.api, str(http_problem(failure).status)).inc()
            if model is not None:
                self.metrics.called(model, ok=False)
                self.metrics.failed(model, None, "transport")
            if not relayed.started:
                await send_error(send, failure)
            elif relayed.in_band is not None:  # said in the stream's own framing: part of an answer is never
                await send({"type": "http.response.body", "body": relayed.told(failure)})  # passed for all
            # else the reply has no framing to say it in (a whole JSON body, an error body): it is left unended, and
            # the server closes the connection without its end — a client reading it sees it cut short
            broke = ErrorRecord(SERVER, provider, None, type(exc).__name__, reason, True, None, None)
            self.publish(bridge.push(ErrorEvent(broke)) + bridge.end())  # subscribers see it fail, not end well
        finally:
            watch.left()  # stopped on any way out (a second call changes nothing)

    async def _stopped(self, relayed: Relayed, bridge: SigilBridge, provider: str) -> None:
        """A reply the gateway's shutdown cut: the client told in band (once its stream began), the subscribers by an
        error and the stream's end."""
        stopping = UpstreamFailure(f"the gateway stopped: its {SHUTDOWN_GRACE_SEC} s for open replies ran out")
        if relayed.started and relayed.in_band is not None:
            with contextlib.suppress(Exception):
                await relayed.send({"type": "http.response.body", "body": relayed.told(stopping)})
        stopped = ErrorRecord(SERVER, provider, None, "gateway_stopped", str(stopping), True, None, None)
        self.publish(bridge.push(ErrorEvent(stopped)) + bridge.end())

    async def _relay(
        self,
        scope: Scope,
        url: URL,
        body: bytes,
        headers: dict[str, str],
        send: Relayed,
        bridge: SigilBridge,
        model: str | None,
        provider: str,
        adapter_type: Any,
    ) -> None:
        """The upstream's response to the client unchanged (or, gated, its surface text once the packet validated),
        and to the subscribers as SIGIL. ``model``: the metrics' label of a model call, None for a request that is
        none (``GET /v1/models``): relayed and counted as a request only."""
        async with self._upstream.request(scope["method"], url, body, headers) as response:
            if model is None:
                await self._relay_plain(response, send)
                return
            if self.gate is not None and response.status_code < 400:
                self.requests.labels(self.api, str(response.status_code)).inc()
                await self._relay_gated(response, body, send, bridge, model)
                return
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": _relayed_headers(response)})  # fmt: skip
            self.requests.labels(self.api, str(response.status_code)).inc()
            if response.status_code >= 400:  # relayed as it comes; its first MAX_ERROR_BODY bytes classified
                data = await self._relay_error(response, send)
                record = classify(provider, response.status_code, data, {k.lower(): v for k, v in response.headers})
                self.metrics.called(model, ok=False)
                self.metrics.failed(model, record)
                self.publish(bridge.push(ErrorEvent(record)))
                self.publish(bridge.end())
                return
            if response.status_code in NO_BODY:  # no answer to count, and no body to tell anything in
                await send({"type": "http.response.body", "body": b""})
                self.metrics.called(model, ok=False)
                self.metrics.failed(model, None, "server")
                self.publish(bridge.end())
                return
            if _whole(response) and provider != "ollama":  # not a stream: its usage is in the one JSON body
                await self._relay_whole(response, send, model)
                self.publish(bridge.end())
                return
            await self._relay_stream(response, send, bridge, model, provider, adapter_type)

    async def _relay_stream(
        self, response: UpstreamReply, send: Relayed, bridge: SigilBridge, model: str, provider: str, adapter_type: Any
    ) -> None:
        """A stream of events, relayed whole (in_band.py) as they come, to the client and (as SIGIL) to the
        subscribers; a stream whose body ends before the stream did is told so in band (UpstreamFailure)."""
        adapter = adapter_type(provider)
        failed, publishing = False, self.sender is not None  # frames are encoded only for subscribers
        held: list[bytes] = []  # without subscribers: parsed for the metrics once the client has it all
        size = 0
        api = self.api
        # an event still arriving is relayed once whole (in_band.py: why) — unless the body is compressed
        # (relayed undecoded, as the client asked): its events cannot be seen, so it is relayed as it comes
        aligned = WholeEvents(api) if _identity(response) else None
        send.in_band = aligned.error if aligned is not None else None  # a stream can say it broke off
        unended = 0  # bytes since the last end of an event
        async for data in response.chunks():
            end = event_end(api, data)
            unended = len(data) - end if end else unended + len(data)
            if unended > MAX_EVENT:  # as the adapter refuses it (its parser would hold it): the relay ends too
                raise UpstreamFailure(f"sent an event longer than {MAX_EVENT} bytes, which no model's stream sends; "
                                      "the gateway does not read further")  # fmt: skip
            given = data if aligned is None else aligned.take(data)
            if given and response.drained():  # the body's last piece: written with the end, one write for both
                send.last = given
            elif given:
                await send({"type": "http.response.body", "body": given, "more_body": True})
            if not publishing and size + len(data) <= HELD_FOR_METRICS:
                held.append(data)
                size += len(data)
                continue
            events = adapter.feed(b"".join(held) + data if held else data)
            for event in events:
                failed = self._count(model, event) or failed
            if publishing:  # what one read carried, in as few frames as it fills (bridge.py: the framing)
                self.publish_from(bridge, bridge.push_many(events))
            held, size = [], 0
        unfinished = aligned.rest() if aligned is not None else b""
        if not publishing:  # the bytes held for the metrics, read now: whether the stream ended is the adapter's
            failed = await self._count_held(model, adapter, b"".join(held), failed)  # to say (its end marker)
        if aligned is not None and (unfinished or not adapter.done):  # the body ended, the stream did not: told
            raise UpstreamFailure(_cut_short(unfinished, adapter.end_marker))  # in band, as a break is
        last, send.last = send.last, b""
        await send({"type": "http.response.body", "body": last})
        events = adapter.close()
        for event in events:
            failed = self._count(model, event) or failed
        self.metrics.called(model, ok=not failed)
        if publishing:
            self.publish(bridge.push_many(events))
            self.publish(bridge.end())

    async def _relay_plain(self, response: UpstreamReply, send: Send) -> None:
        """A request that is no model call, relayed as it came (status, headers, body)."""
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": _relayed_headers(response)})  # fmt: skip
        self.requests.labels(self.api, str(response.status_code)).inc()
        async for data in response.chunks():
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def _relay_error(self, response: UpstreamReply, send: Send) -> bytes:
        """An error reply relayed unchanged as it arrives; its first ``MAX_ERROR_BODY`` bytes kept to classify (an
        upstream's 320 MiB error body, read whole, held 1.4 GB of the gateway's memory)."""
        held = bytearray()
        async for data in response.chunks():
            await send({"type": "http.response.body", "body": data, "more_body": True})
            if len(held) < MAX_ERROR_BODY:
                held += data[: MAX_ERROR_BODY - len(held)]
        await send({"type": "http.response.body", "body": b""})
        return bytes(held)

    async def _relay_whole(self, response: UpstreamReply, send: Send, model: str) -> None:
        """A whole (non-streamed) reply, relayed unchanged and then counted: one model call, its tokens as the body
        says (``reply_usage``)."""
        held: list[bytes] = []
        size = 0
        async for data in response.chunks():
            await send({"type": "http.response.body", "body": data, "more_body": True})
            size += len(data)
            if size <= MAX_REPLY_BYTES:
                held.append(data)
        await send({"type": "http.response.body", "body": b""})
        counted = reply_usage(b"".join(held)) if size <= MAX_REPLY_BYTES else None
        if counted is not None:
            self.metrics.used(model, *counted)
            tracing.note(tracing.current(), gen_ai__usage__input_tokens=counted[0],
                         gen_ai__usage__output_tokens=counted[1])  # fmt: skip
        self.metrics.called(model, ok=True)

    async def _count_held(self, model: str, adapter: Any, held: bytes, failed: bool) -> bool:
        """A relayed reply's held bytes into the metrics (and its adapter, which then knows whether the stream
        ended), a few events at a time with the loop free in between: parsing an event costs ~10 µs, and the other
        requests would otherwise wait for all of them — a stream of 300,000 comments after its end marker is read in
        turns, never in one. Events that can carry only text are recognised by one pattern match (~1 µs) and
        skipped: they change neither the usage, the errors nor the end. Whether any failed, with ``failed``."""
        for part in adapter.without_text_events(held, METRICS_BATCH):  # what can carry usage, an error or the end
            for event in adapter.feed(part):
                failed = self._count(model, event) or failed
            await asyncio.sleep(0)
        return failed

    async def close(self) -> None:
        """Close the upstream connections (the server's shutdown)."""
        await self._upstream.close()
        await asyncio.to_thread(tracing.flush)  # the spans of the last requests, before the process ends

    async def _relay_gated(
        self, response: UpstreamReply, body: bytes, send: Relayed, bridge: SigilBridge, model: str
    ) -> None:
        """The reply through the packet gate (see ``gated``): streamed as gated chunks, or whole. The chunks name
        the model the client asked for (the metrics' label would show the upstream's address)."""
        assert self.gate is not None
        try:
            request = safejson.loads(body)
            streamed, named = bool(request.get("stream")), request.get("model")
        except (ValueError, AttributeError, UnicodeDecodeError):
            streamed, named = False, None
        if not streamed:
            await gated.send_gated_whole(self.gate(), await response.read(MAX_REPLY_BYTES), send)
            self.metrics.called(model, ok=True)
            return
        stream = gated.GatedStream(self.gate(), named[:200] if isinstance(named, str) else "unknown", send)
        send.in_band = stream.broke_off  # a break after the head: the client reads it in band, then [DONE]
        await stream.start()
        failed = False
        async for data in response.chunks():
            for event in await stream.feed(data):
                failed = self._count(model, event) or failed
                if self.sender is not None:
                    self.publish_from(bridge, bridge.push(event))
        for event in await stream.close():
            failed = self._count(model, event) or failed
            if self.sender is not None:
                self.publish_from(bridge, bridge.push(event))
        self.metrics.called(model, ok=not failed)
        self.publish(bridge.end())

    def _count(self, model: str, event: Any) -> bool:
        """An event of a proxied stream in the metrics: tokens, in-stream errors. True for an error."""
        if isinstance(event, Usage):
            self.metrics.used(model, event.input_tokens or 0, event.output_tokens or 0)
        if isinstance(event, ErrorEvent):
            self.metrics.failed(model, event.error)
            return True
        return False

    # -- local model ---------------------------------------------------------------------------------------
    async def _local_completion(self, scope: Scope, body: bytes, send: Send) -> None:
        """The in-process model behind OpenAI's endpoints: ``GET /v1/models``, and ``POST /v1/chat/completions``
        (checked request, one generation at a time, published as SIGIL, answered whole or as an SSE stream, with
        its usage). Anything else is an OpenAI-shaped 404."""
        path = scope["path"].rstrip("/")
        if scope["method"] == "GET" and path.endswith("/models"):
            model = await self._local_model()
            self.requests.labels("local", "200").inc()
            await send_json(send, 200, models_list(model.path.name))
            return
        if scope["method"] != "POST" or not path.endswith("/chat/completions"):
            unknown = UnknownPath("the local gateway serves GET /v1/models and POST /v1/chat/completions")
            self.requests.labels("local", str(await send_error(send, unknown))).inc()
            return
        try:
            request = parse_chat_request(body)
        except ChatRequestError as exc:
            self.requests.labels("local", str(await send_error(send, exc))).inc()
            return
        model = await self._local_model()
        try:
            pieces, finish, counted = await self._generate(model, request)
        except ValueError as exc:  # a tool's parameters llama.cpp cannot turn into a grammar
            unusable = ChatRequestError(f"tools: the local model cannot be constrained to them: {exc}")
            self.requests.labels("local", str(await send_error(send, unusable))).inc()
            return
        calls: list[dict[str, Any]] = []
        if request.callable_tools:  # the answer was constrained: its content, or its calls
            content, calls = local_tools.read_answer("".join(pieces))
            pieces = [content] if content else []
            finish = "tool_calls" if calls else finish
        self.requests.labels("local", "200").inc()
        base = {"id": f"chatcmpl-local-{time.time_ns()}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model.path.name}  # fmt: skip
        if request.stream:
            await stream_answer(send, base, pieces, finish, counted if request.include_usage else None, calls)
        else:
            message: dict[str, Any] = {"role": "assistant", "content": "".join(pieces) if not calls else None}
            if calls:
                message["tool_calls"] = calls
            choice = {"index": 0, "message": message, "finish_reason": finish}
            await send_json(send, 200, {**base, "object": "chat.completion", "choices": [choice], "usage": counted})

    async def _local_model(self) -> LocalModel:
        """The local model, loaded on first use."""
        if self._local is None:
            from .local import LocalModel

            self._local = await asyncio.to_thread(LocalModel)
        model: LocalModel = self._local
        return model

    async def _generate(self, model: LocalModel, request: ChatRequest) -> tuple[list[str], str | None, dict[str, int]]:
        """The completion's text pieces, finish reason and usage; its tokens are published as one SIGIL stream."""
        messages = [m.as_prompt() for m in request.messages]
        options: dict[str, Any] = {"max_tokens": request.token_budget, "temperature": request.temperature}
        if request.json_schema:
            options["json_schema"] = request.json_schema
        if request.callable_tools:
            messages = [local_tools.instructions(request), *messages]
            options["json_schema"] = local_tools.answer_schema(request)
        bridge = self._bridge(model.vocabulary)
        async with self._lock:  # one generation at a time: the model is not re-entrant
            tokens = await asyncio.to_thread(lambda: list(model.tokens(messages, **options)))
            finish, tail, used = model.finish_reason, model.tail_text, (model.prompt_tokens, len(tokens))
        name = f"local:{model.path.name}"
        self.metrics.called(name, ok=True)
        self.metrics.used(name, *used)
        tracing.note(tracing.current(), gen_ai__response__model=name, gen_ai__usage__input_tokens=used[0],
                     gen_ai__usage__output_tokens=used[1])  # fmt: skip
        for token in tokens:
            self.publish_from(bridge, bridge.tokens(Mode.TEXT, [token.id]))
        self.publish(bridge.end())
        return [t.text for t in tokens if t.text] + ([tail] if tail else []), finish, usage(*used)


def _relayed_headers(response: UpstreamReply) -> list[tuple[bytes, bytes]]:
    """The upstream's response headers as the client gets them, byte for byte as the upstream sent them (a value in
    UTF-8 or any other 8-bit text stays as it was): all but the hop-by-hop ones (its ``date`` and ``server`` among
    them — the gateway's server adds none of its own, so none is sent twice), and but a header no HTTP server may
    send — a name that is no token, a value with a control byte — which the client's server would refuse mid-reply,
    leaving the client without any answer."""
    hop = _HOP_BY_HOP | connection_named(response.raw_headers)
    return [(name, value) for name, value in response.raw_headers
            if name.decode("latin-1").lower() not in hop and name
            and not _NOT_A_TOKEN.search(name) and not _CONTROL.search(value)]  # fmt: skip


def connection_named(headers: Iterable[tuple[bytes, bytes]]) -> set[str]:
    """The headers a message's ``Connection`` header names (lower-cased): like the hop-by-hop ones, they are for
    one connection and are not passed on (RFC 9110 7.6.1)."""
    return {option.strip().lower() for name, value in headers if name.lower() == b"connection"
            for option in value.decode("latin-1").split(",") if option.strip()}  # fmt: skip


@dataclass
class Relayed:
    """What the client has been sent of one reply: whether its head went (its status can no longer change then),
    and how a failure after it is told in band (``in_band``: the bytes for an error; None: the reply has no framing
    to say it in)."""

    send: Send
    started: bool = False
    in_band: Callable[[GroundstateError], bytes] | None = None
    last: bytes = b""  # the body's last piece, kept to go with the reply's end; written first by ``told``

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        self.started = True
        await self.send(message)

    def told(self, failure: GroundstateError) -> bytes:
        """What tells the client in band that the reply failed: the last piece it has not been sent yet, then the
        error in the stream's framing. Only for a reply with ``in_band``."""
        assert self.in_band is not None
        last, self.last = self.last, b""
        return last + self.in_band(failure)


class ClientWatch:
    """Whether the client of a reply being relayed went away, watched by one task beside the relay, which runs in
    the request's own task: on the client's departure the watch cancels that task, so the upstream is no longer
    read (and paid for). A second task for the relay and a wait on both cost ~40 µs a request. After a request's
    body an ASGI server's next message is ``http.disconnect`` (also once the reply is complete); one that sends
    anything else is not watched (never asked again: a receive that answers at once would spin the loop)."""

    def __init__(self, receive: Receive) -> None:
        self._relaying: asyncio.Task[Any] | None = asyncio.current_task()
        self._gone = False
        self._task = asyncio.ensure_future(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        if (await receive())["type"] != "http.disconnect":
            return
        if self._relaying is not None:  # still relaying: the request's task waits inside the relay, where the
            self._gone = True  # cancellation lands
            self._relaying.cancel()

    def left(self) -> bool:
        """Stop watching; whether the client went away during the relay (its cancellation then taken back, so the
        request's task goes on to end the reply)."""
        relaying, self._relaying = self._relaying, None
        self._task.cancel()
        if self._gone and relaying is not None:
            relaying.uncancel()
        return self._gone


def upstream_credentials(upstream: str) -> tuple[str, str | None]:
    """``upstream`` without its ``user:password@``, and the Basic ``Authorization`` they make (None without). The
    operator's credentials in ``--upstream`` replace the client's ``Authorization`` (an SDK always sends one, and the
    HTTP library refused to send both: every request was a 500)."""
    parts = urlsplit(upstream)
    if "@" not in parts.netloc:
        return upstream, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), f"Basic {token}"


def forwarded_path(scope: Scope) -> str:
    """The request's path as the client sent it, still percent-encoded (``%3F`` stays a character of the path, not
    the start of a query), to be put after the upstream's. ``PathRefused`` for a path that does not begin with ``/``
    (``*@host/...`` would make the rest of the URL another host, reached with the operator's credentials) and for a
    ``.`` or ``..`` segment, plain, encoded or with parameters (``..;x``, which servlet containers resolve as ``..``):
    resolved on the way, it would leave the upstream's base path (``/tenant-a/...``)."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) and raw else quote(scope["path"])
    if not path.startswith("/"):
        raise PathRefused(f"the request target {path[:200]!r} is not a path beginning with '/'; the gateway forwards "
                          "paths under the upstream's, to the upstream only")  # fmt: skip
    for segment in path.split("/") if "." in path or "%" in path else ():  # no dot, even encoded: no dot segment
        if any(part.split(";", 1)[0] in (".", "..") for part in re.split(r"[/\\]", unquote(segment))):
            raise PathRefused(f"the path {path[:200]!r} has a '.' or '..' segment; the gateway forwards paths under "
                              "the upstream's as they are, never out of it")  # fmt: skip
    return path


@functools.lru_cache(maxsize=16)
def _split(target: str) -> SplitResult:
    """The upstream's URL in parts (one upstream per gateway: split once)."""
    return urlsplit(target)


def forwarded_url(target: str, scope: Scope) -> URL:
    """Where a request goes: the upstream's path followed by the client's (``forwarded_path``, sent as it is — not
    decoded and re-encoded on the way), and the upstream's query (``?api-version=...``) followed by the client's."""
    path = forwarded_path(scope)
    base = _split(target)
    client_query = scope.get("query_string") or b""
    query = "&".join(q for q in (base.query, client_query.decode("latin-1")) if q)
    return URL.build(scheme=base.scheme, authority=base.netloc, path=base.path.rstrip("/") + path,
                     query_string=query, encoded=True)  # fmt: skip


def _cut_short(unfinished: bytes, end_marker: str) -> str:
    """Why a stream whose body ended cleanly is told it broke off."""
    if unfinished:
        return f"the upstream's stream ended inside an event ({len(unfinished)} bytes of it, never finished)"
    return f"the upstream's stream ended without {end_marker}"


def _identity(response: UpstreamReply) -> bool:
    """Whether the reply's body is sent as it is (no ``Content-Encoding`` but ``identity``): its events readable."""
    coding = next((v for k, v in response.headers if k.lower() == "content-encoding"), "identity")
    return coding.strip().lower() in ("", "identity")


def _whole(response: UpstreamReply) -> bool:
    """Whether the reply is one JSON body rather than a stream of events."""
    kind = next((v for k, v in response.headers if k.lower() == "content-type"), "")
    return kind.split(";", 1)[0].strip().lower() == "application/json"


STARTUP_FAILURE = 3  # uvicorn's exit status when the server could not start (its address taken)


def serve(
    upstream: str,
    api: str,
    host: str,
    port: int,
    publish: str | None,
    metrics_reader: Callable[[str], bool] | None,
    gate: gated.GateFactory | None = None,
    max_body: int = MAX_BODY,
    publish_hold: float | None = None,
) -> None:
    """Serve the gateway until interrupted (``metrics_reader``, ``gate``, ``max_body``, ``publish_hold``: as for
    Gateway; None: ``PUBLISH_HOLD_SEC``)."""
    import uvicorn

    from .coalesced import CoalescingHttpToolsProtocol  # uvicorn's, imported only to serve

    hold = PUBLISH_HOLD_SEC if publish_hold is None else publish_hold
    app = Gateway(upstream, api, publish, metrics_reader, gate, max_body, hold)
    # No Date or Server header of uvicorn's own: a relayed reply carries the upstream's (sent twice, they were).
    # asyncio's event loop even where uvloop is installed (uvicorn's own choice then): the loop the tests run on.
    # No access log (at this log level none was printed, yet each reply's line was composed) and no rewriting of
    # the client's address from X-Forwarded-For (nothing here reads it): each cost a little of every request.
    # uvicorn's protocol with a reply's head held to go out with its first piece (coalesced.py); no WebSockets,
    # which the gateway never serves.
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", server_header=False,
                                           date_header=False, timeout_graceful_shutdown=SHUTDOWN_GRACE_SEC,
                                           loop="asyncio", access_log=False, proxy_headers=False,
                                           http=CoalescingHttpToolsProtocol, ws="none"))  # fmt: skip
    server.run()  # not uvicorn.run, which swallows the Ctrl+C it re-raises: the gateway exits 130 like serve
    if not server.started:  # the address was taken, or could not be bound
        raise SystemExit(STARTUP_FAILURE)
