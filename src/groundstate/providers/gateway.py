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
from typing import TYPE_CHECKING, Any

import httpx

from ..wire import ByteVocabulary, Mode
from .apis import provider_api
from .bridge import SigilBridge
from .chat_request import ChatRequest, ChatRequestError, parse_chat_request
from .errors import classify
from .normalized import ErrorEvent

if TYPE_CHECKING:
    from .local import LocalModel

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
        """An OpenAI-style chat completion from the in-process model: checked request, one generation at a time
        (published as SIGIL), answered whole or as an SSE stream."""
        if scope["method"] != "POST" or not scope["path"].rstrip("/").endswith("/chat/completions"):
            await _json(send, 404, _request_error("the local gateway serves POST /v1/chat/completions"))
            return
        try:
            request = parse_chat_request(body)
        except ChatRequestError as exc:
            await _json(send, 400, _request_error(str(exc)))
            return
        if self._local is None:
            from .local import LocalModel

            self._local = await asyncio.to_thread(LocalModel)
        model = self._local
        pieces, finish = await self._generate(model, request)
        base = {"id": f"chatcmpl-local-{time.time_ns()}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model.path.name}  # fmt: skip
        if request.stream:
            await _stream_answer(send, base, pieces, finish)
        else:
            message = {"role": "assistant", "content": "".join(pieces)}
            choice = {"index": 0, "message": message, "finish_reason": finish}
            await _json(send, 200, {**base, "object": "chat.completion", "choices": [choice]})

    async def _generate(self, model: LocalModel, request: ChatRequest) -> tuple[list[str], str | None]:
        """The completion's text pieces and finish reason; its tokens are published as one SIGIL stream."""
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        options: dict[str, Any] = {"max_tokens": request.token_budget, "temperature": request.temperature}
        if request.json_schema:
            options["json_schema"] = request.json_schema
        bridge = SigilBridge(model.vocabulary, next(self._streams))
        async with self._lock:  # one generation at a time: the model is not re-entrant
            tokens = await asyncio.to_thread(lambda: list(model.tokens(messages, **options)))
            finish, tail = model.finish_reason, model.tail_text
        for token in tokens:
            self.publish(bridge.tokens(Mode.TEXT, [token.id]))
        self.publish(bridge.end())
        return [t.text for t in tokens if t.text] + ([tail] if tail else []), finish


def _request_error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


async def _stream_answer(send: Send, base: dict[str, Any], pieces: list[str], finish: str | None) -> None:
    """The answer as OpenAI-style SSE: a role chunk, one chunk per piece, the finish, ``[DONE]``."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for piece in [None, *pieces]:
        delta = {"role": "assistant", "content": ""} if piece is None else {"content": piece}
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        data = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        await send({"type": "http.response.body", "body": data, "more_body": True})
    last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    await send({"type": "http.response.body", "body": b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n"})


async def _json(send: Send, status: int, payload: dict[str, Any]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def serve(upstream: str, api: str, host: str, port: int, publish: str | None) -> None:
    import uvicorn

    uvicorn.run(Gateway(upstream, api, publish), host=host, port=port, log_level="warning")
