"""The gateway: an HTTP proxy clients point their SDK at.

It forwards each request to the upstream, returns the upstream's response to the client unchanged, and
publishes each response as SIGIL frames (one stream id per response) on a ZMQ PUB socket, with HTTP errors
as classified UPSTREAM_ERROR frames. With ``upstream="local"`` it serves the local model behind an
OpenAI-compatible ``/v1/chat/completions`` endpoint instead, publishing the model's real token ids.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx

from ..wire import ByteVocabulary, Mode
from .apis import provider_api
from .bridge import SigilBridge
from .chat_request import ChatRequestError, parse_chat_request
from .errors import classify
from .normalized import ErrorEvent

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_HOP_BY_HOP = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}


class Gateway:
    def __init__(self, upstream: str, api: str = "openai-chat", publish: str | None = None) -> None:
        if upstream != "local":
            provider_api(api)  # an unknown API is refused here, naming the known ones
        self.upstream, self.api = upstream.rstrip("/"), api
        self.sender = None
        if publish:
            from ..wire import FrameSender

            self.sender = FrameSender(publish, "pub")
        self._streams = itertools.count(1)
        self._local: Any = None
        self._http: httpx.AsyncClient | None = None  # one connection pool for all forwarded requests
        self._lock = asyncio.Lock()  # the local model generates one response at a time

    def publish(self, data: bytes) -> None:
        if self.sender is not None and data:
            self.sender.send(data)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if self._http is not None:
                        await self._http.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if self.upstream == "local":
            await self._local_completion(scope, body, send)
        else:
            await self._forward(scope, body, send)

    # -- proxy ---------------------------------------------------------------------------------------------
    async def _forward(self, scope: Scope, body: bytes, send: Send) -> None:
        chosen = provider_api(self.api)
        adapter_type, provider = chosen.adapter, chosen.provider
        headers = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in _HOP_BY_HOP
        }
        url = (
            self.upstream
            + scope["path"]
            + (("?" + scope["query_string"].decode()) if scope.get("query_string") else "")
        )
        bridge = SigilBridge(ByteVocabulary(), next(self._streams))
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=300.0))
        async with self._http.stream(scope["method"], url, content=body, headers=headers) as response:
            await send({
                "type": "http.response.start",
                "status": response.status_code,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()
                            if k.lower() not in _HOP_BY_HOP],
            })  # fmt: skip
            if response.status_code >= 400:
                data = await response.aread()
                await send({"type": "http.response.body", "body": data})
                self.publish(bridge.push(ErrorEvent(classify(provider, response.status_code, data, response.headers))))
                self.publish(bridge.end())
                return
            adapter = adapter_type(provider)
            async for data in response.aiter_raw():
                await send({"type": "http.response.body", "body": data, "more_body": True})  # unchanged
                for event in adapter.feed(data):
                    self.publish(bridge.push(event))
            await send({"type": "http.response.body", "body": b""})
            for event in adapter.close():
                self.publish(bridge.push(event))
            self.publish(bridge.end())

    # -- local model ---------------------------------------------------------------------------------------
    async def _local_completion(self, scope: Scope, body: bytes, send: Send) -> None:
        if scope["method"] != "POST" or not scope["path"].rstrip("/").endswith("/chat/completions"):
            await _json(
                send,
                404,
                {
                    "error": {
                        "message": "the local gateway serves POST /v1/chat/completions",
                        "type": "invalid_request_error",
                        "code": None,
                    }
                },
            )
            return
        try:
            request = parse_chat_request(body)
        except ChatRequestError as exc:
            await _json(send, 400, {"error": {"message": str(exc), "type": "invalid_request_error", "code": None}})
            return
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        if self._local is None:
            from .local import LocalModel

            self._local = await asyncio.to_thread(LocalModel)
        model = self._local
        options: dict[str, Any] = {"max_tokens": request.token_budget, "temperature": request.temperature}
        schema = request.json_schema
        if schema:
            options["json_schema"] = schema
        bridge = SigilBridge(model.vocabulary, next(self._streams))
        base = {
            "id": f"chatcmpl-local-{time.time_ns()}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model.path.name,
        }
        async with self._lock:
            tokens = await asyncio.to_thread(lambda: list(model.tokens(messages, **options)))
            finish, tail = model.finish_reason, model.tail_text
        stream = request.stream
        text = "".join(t.text for t in tokens) + tail
        for token in tokens:
            self.publish(bridge.tokens(Mode.TEXT, [token.id]))
        self.publish(bridge.end())
        if not stream:
            await _json(send, 200, {**base, "object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}]})  # fmt: skip
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        pieces = [t.text for t in tokens if t.text] + ([tail] if tail else [])
        for piece in [None, *pieces]:
            delta = {"role": "assistant", "content": ""} if piece is None else {"content": piece}
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            await send(
                {
                    "type": "http.response.body",
                    "body": b"data: " + json.dumps(chunk).encode() + b"\n\n",
                    "more_body": True,
                }
            )
        last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        await send(
            {"type": "http.response.body", "body": b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n"}
        )


async def _json(send: Send, status: int, payload: dict[str, Any]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def serve(upstream: str, api: str, host: str, port: int, publish: str | None) -> None:
    import uvicorn

    uvicorn.run(Gateway(upstream, api, publish), host=host, port=port, log_level="warning")
