"""OpenAI-shaped answers the gateway sends itself: errors (every one a JSON body with a type and a status that says
what went wrong), the models list, chat-completion chunks with usage. SDKs turn these into their typed exceptions
and objects, so a client sees a reason, never a bare 500."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..errors import GroundstateError, InputError, LimitError, NotFoundError, UpstreamFailed, http_problem

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` as OpenAI sends it."""
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


class RequestTooLarge(LimitError):
    """A request body past the gateway's ``max_body``."""

    code = "request_too_large"


class UnknownPath(NotFoundError):
    """A path an HTTP surface does not serve (the gateway's, the guard's HTTP transport's)."""


class PathRefused(InputError):
    """A request path the gateway will not forward (one that would leave the upstream's base path)."""


class ReplyRefused(UpstreamFailed):
    """The packet gate refused the model's reply: nothing of it past the refusal reaches the client."""

    code = "packet_gate"
    openai_type = "policy_violation"


class ReplyCutOff(ReplyRefused):
    """The model's reply ended at its output-token limit before its envelope was whole."""

    code = "max_tokens"


def problem_body(error: GroundstateError) -> tuple[int, dict[str, Any]]:
    """The status and the OpenAI-shaped body of an error (status and code from ``errors.HTTP_STATUSES``); the
    ``type`` OpenAI's SDKs show: the error's own, else ``upstream_error`` for an upstream's failure, else
    ``invalid_request_error`` for a request refused, ``server_error`` for the rest."""
    problem = http_problem(error)
    kind = getattr(type(error), "openai_type", None) or (
        "upstream_error" if isinstance(error, UpstreamFailed)
        else "invalid_request_error" if problem.status < 500 else "server_error"
    )  # fmt: skip
    return problem.status, error_body(problem.message, kind, problem.code)


async def send_error(send: Send, error: GroundstateError) -> int:
    """One whole error response (see ``problem_body``); returns its status, for the requests' metrics."""
    status, body = problem_body(error)
    await send_json(send, status, body)
    return status


async def send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    """One whole JSON response."""
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def models_list(model_id: str) -> dict[str, Any]:
    """``GET /v1/models`` for a gateway that serves one model."""
    return {"object": "list", "data": [{"id": model_id, "object": "model", "created": int(time.time()),
                                        "owned_by": "groundstate"}]}  # fmt: skip


def usage(prompt: int, completion: int) -> dict[str, int]:
    """Token counts as OpenAI reports them."""
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def stream_answer(
    send: Send,
    base: dict[str, Any],
    pieces: list[str],
    finish: str | None,
    counted: dict[str, int] | None,
    calls: list[dict[str, Any]] | None = None,
) -> None:
    """The answer as OpenAI-style SSE: a role chunk, one chunk per piece (or per tool call), the finish, with
    ``counted`` a last chunk carrying the usage and no choices (``stream_options.include_usage``), then ``[DONE]``."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    chunks += [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    chunks += [{**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, **call}]},
                                     "finish_reason": None}]} for i, call in enumerate(calls or [])]  # fmt: skip
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if counted is not None:
        chunks.append({**base, "choices": [], "usage": counted})
    for chunk in chunks:
        await send({"type": "http.response.body", "body": b"data: " + json.dumps(chunk).encode() + b"\n\n",
                    "more_body": True})  # fmt: skip
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
