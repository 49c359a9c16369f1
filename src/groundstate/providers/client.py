"""Streaming clients on httpx, with a retry policy driven by the error classification.

- ``auth``, ``quota``, ``request``, ``content_filter`` and ``ambiguous`` errors are never retried (ambiguous:
  the conservative choice); ``rate``, ``overload`` and ``server`` are, after the hinted delay (or an
  exponential backoff), up to ``max_attempts``.
- An error *inside* the stream before any content (an in-stream overload as the first event) is retried
  the same way, unless a non-retryable error came first; once content has streamed, a failure is surfaced
  to the caller, never silently retried.
- Every retried failure is kept in ``attempts``; the caller sees one clean stream or the final error.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from .apis import provider_api
from .errors import MAX_ERROR_BODY, SERVER, ErrorRecord, classify
from .normalized import ErrorEvent, Event, Finish, Usage


@dataclass
class RetryPolicy:
    """How often and how long to retry a failed request before any content has been passed on."""

    max_attempts: int = 4
    base_delay_s: float = 0.5  # exponential backoff when the provider gives no hint
    max_delay_s: float = 60.0

    def delay(self, attempt: int, record: ErrorRecord) -> float:
        """Seconds to wait before the next attempt: the provider's hint if it gave one, else exponential backoff."""
        hinted = record.retry_after_s
        delay = hinted if hinted is not None else self.base_delay_s * 2 ** (attempt - 1)
        return min(delay, self.max_delay_s)


@dataclass
class StreamClient:
    """``async for event in client.stream(body)``; one request, retried as the policy allows."""

    base_url: str
    api: str = "openai-chat"
    api_key: str | None = None
    timeout: httpx.Timeout = field(default_factory=lambda: httpx.Timeout(30.0, read=120.0))
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    attempts: list[ErrorRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        provider_api(self.api)  # an unknown API is refused here, naming the known ones

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "text/event-stream", "content-type": "application/json"}
        if self.api_key and self.api == "anthropic":
            headers |= {"x-api-key": self.api_key, "anthropic-version": "2023-06-01"}
        elif self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    async def stream(self, body: dict[str, Any]) -> AsyncIterator[Event]:
        """The normalized events of one completion, retried (per ``retry``) while nothing has been passed on."""
        api = provider_api(self.api)
        path, adapter_type, provider = api.path, api.adapter, api.provider
        self.attempts = []
        async with httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, verify=tls_context()) as http:
            for attempt in range(1, self.retry.max_attempts + 1):
                gate = _Gate(may_retry=attempt < self.retry.max_attempts)
                try:
                    async with http.stream("POST", path, json=body, headers=self._headers()) as response:
                        if response.status_code >= 400:
                            gate.failure = classify(
                                provider, response.status_code, await _first_bytes(response), response.headers
                            )
                        else:
                            adapter = adapter_type(provider)
                            async for data in response.aiter_bytes():
                                for passed in gate.pass_on(adapter.feed(data)):
                                    yield passed
                                if gate.failure is not None:
                                    break
                            if gate.failure is None:
                                for event in gate.held + adapter.close():
                                    yield event
                                return
                except httpx.TransportError as exc:
                    gate.failure = _broken_connection(provider, exc)
                    if gate.content:  # the connection broke after content: surface it, never retry
                        yield ErrorEvent(gate.failure)
                        return
                failure = gate.failure
                assert failure is not None
                if not _retryable(failure) or not gate.may_retry:
                    for event in gate.held:
                        yield event
                    yield ErrorEvent(failure)
                    return
                self.attempts.append(failure)
                await self.sleep(self.retry.delay(attempt, failure))


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The certificate-verifying TLS context every request shares: loading the CA bundle costs ~20 ms, which each
    new client paid per model call (bench/scale) — the context itself is safe to share across connections."""
    return httpx.create_ssl_context()


def _broken_connection(provider: str, exc: httpx.TransportError) -> ErrorRecord:
    return ErrorRecord(SERVER, provider, None, type(exc).__name__, str(exc), True, None, None, {"exception": repr(exc)})


class _Gate:
    """Holds events back until content starts; before that, a retryable in-stream error means: retry."""

    def __init__(self, may_retry: bool) -> None:
        self.may_retry = may_retry
        self.content = False
        self.held: list[Event] = []
        self.failure: ErrorRecord | None = None

    def pass_on(self, events: list[Event]) -> list[Event]:
        """What passes of ``events``; none after one that makes the attempt a failure to retry."""
        passed: list[Event] = []
        for event in events:
            passed += self.admit(event)
            if self.failure is not None:
                break
        return passed

    def admit(self, event: Event) -> list[Event]:
        """The events to pass on now."""
        if self.content:
            return [event]
        if isinstance(event, ErrorEvent) and _retryable(event.error) and self.may_retry:
            self.failure = event.error
            return []
        if isinstance(event, ErrorEvent):
            self.may_retry = False  # e.g. quota then "failed": a retry cannot help, whatever follows
        if not _is_content(event):
            self.held.append(event)
            return []
        self.content = True
        released, self.held = [*self.held, event], []
        return released


async def _first_bytes(response: httpx.Response) -> bytes:
    """An error reply's first ``MAX_ERROR_BODY`` bytes, all that is classified: the provider decides how long its
    error body is, and reading it whole let it hold the run's memory at its will."""
    held = bytearray()
    async for data in response.aiter_bytes():
        held += data[: MAX_ERROR_BODY - len(held)]
        if len(held) >= MAX_ERROR_BODY:
            break
    return bytes(held)


def _retryable(record: ErrorRecord) -> bool:
    return record.retryable is True


def _is_content(event: Event) -> bool:
    """Anything the user would see or act on; finish and usage records are not content."""
    return not isinstance(event, ErrorEvent | Finish | Usage)
