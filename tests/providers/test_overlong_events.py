"""A provider's stream is the provider's to write: an event (an SSE event, an Ollama line) that never ends was held
whole by the parser, so an upstream could grow whoever read it — the gateway's metrics, a run's model client — by
as much as it sent (an attack grew the gateway by a megabyte per relayed megabyte). Past ``MAX_EVENT`` bytes
without an event's end the stream is refused with one error; an error reply is read for its first mebibyte only."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import tracemalloc
from collections.abc import Callable

import pytest

from groundstate.providers import ErrorEvent, OllamaAdapter, OpenAIChatAdapter, StreamAdapter, StreamClient

from ..loopback import raw_loopback

MAX_EVENT = 4 << 20  # the bound docs/providers.md states
PIECE = 1 << 16


@pytest.mark.parametrize(("adapter_type", "piece"), [
    (OpenAIChatAdapter, b"x" * PIECE),  # one line that never ends
    (OpenAIChatAdapter, b"data: " + b"y" * (PIECE - 7) + b"\n"),  # lines that end, never a blank one
    (OllamaAdapter, b"z" * PIECE),  # an NDJSON line that never ends
], ids=["sse line", "sse event", "ndjson line"])  # fmt: skip
def test_an_event_that_never_ends_is_refused_and_not_held(adapter_type: Callable[[], StreamAdapter],
                                                           piece: bytes) -> None:
    adapter = adapter_type()
    events = adapter.feed(b"data: " if adapter_type is OpenAIChatAdapter else b"")
    tracemalloc.start()
    try:
        for _ in range(10 * MAX_EVENT // PIECE):  # ten times the bound
            events += adapter.feed(piece)
        events += adapter.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * MAX_EVENT  # the parser held at most about the bound (it held all 40 MiB)
    errors = [event for event in events if isinstance(event, ErrorEvent)]
    assert len(errors) == 1 and str(MAX_EVENT) in errors[0].error.message and events[-1] is errors[0]


def test_events_of_any_length_under_the_bound_are_read_as_before() -> None:
    """A stream of many events, together far past the bound, each short of it: nothing is refused."""
    adapter = OpenAIChatAdapter()
    event = b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"w" * 60_000 + b'"}}]}\n\n'
    events = [e for _ in range(200) for e in adapter.feed(event)] + adapter.feed(b"data: [DONE]\n\n")
    assert not any(isinstance(e, ErrorEvent) for e in events + adapter.close())


@pytest.mark.alone
def test_a_models_error_body_is_read_for_its_first_mebibyte_only() -> None:
    """A 429 whose body is 64 MiB: the run's client classified it after reading it all; now it reads the first
    mebibyte (the class comes from the status), and gives the error at once."""

    def serve(connection: socket.socket) -> None:
        size = 64 << 20
        connection.sendall(f"HTTP/1.1 429 Too Many\r\ncontent-type: application/json\r\ncontent-length: {size}\r\n\r\n"
                           .encode() + b'{"error": {"message": "slow down", "pad": "')  # fmt: skip
        pad = b"p" * (1 << 20)
        with contextlib.suppress(OSError):
            for _ in range(63):
                connection.sendall(pad)
            time.sleep(2)

    async def run(url: str) -> list[object]:
        client = StreamClient(url)
        client.retry.max_attempts = 1
        return [event async for event in client.stream({"model": "m", "stream": True})]

    with raw_loopback(serve) as url:
        tracemalloc.start()
        try:
            started = time.monotonic()
            events = asyncio.run(run(url))
            took = time.monotonic() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert [type(event) for event in events] == [ErrorEvent]
    assert peak < 16 << 20 and took < 1.5  # it read 64 MiB, and waited for the upstream to send them all
