"""Text conventions applied to a real adapter stream, in the library and through the CLI; client cancellation."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from groundstate.providers import OpenAIChatAdapter, StreamClient, TextConventions, merge_deltas, to_json

from ..pieces import split_at
from .conftest import Script

QWEN = Path(__file__).parent / "fixtures" / "qwen-think-tools.sse"
EXPECTED = [
    {"type": "think", "text": "Use the tool."},
    {"type": "text", "text": "Sure."},
    {"type": "tool_call", "id": None, "name": "now", "arguments": {}, "arguments_error": None},
    {"type": "finish", "reason": "stop", "raw": "stop"},
]


def test_think_tags_and_hermes_calls_over_a_chat_stream_any_split() -> None:
    body = QWEN.read_bytes()
    for cuts in ([], [30], list(range(0, len(body), 7))):
        adapter, conventions = OpenAIChatAdapter(), TextConventions(think_tags=True, text_tools="hermes")
        events = [e for piece in split_at(body, cuts) for e in conventions.feed(adapter.feed(piece))]
        events += conventions.feed(adapter.close()) + conventions.close()
        assert [to_json(e) for e in merge_deltas(events)] == EXPECTED


def test_off_by_default_and_in_the_cli() -> None:
    adapter, conventions = OpenAIChatAdapter(), TextConventions()
    events = conventions.feed(adapter.feed(QWEN.read_bytes()) + adapter.close()) + conventions.close()
    assert to_json(merge_deltas(events)[0])["text"].startswith("<think>Use the tool.</think>Sure.<tool_call>")
    result = subprocess.run(
        [sys.executable, "-m", "groundstate", "providers", "parse", str(QWEN), "--api", "openai-chat",
         "--think-tags", "--text-tools", "hermes"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert [json.loads(line) for line in result.stdout.splitlines()] == EXPECTED


def test_stopping_the_iteration_cancels_the_request(server: tuple[str, Script]) -> None:
    url, script = server
    long_stream = b"".join(b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n' for _ in range(2000))
    script.responses = [(200, {}, long_stream + b"data: [DONE]\n\n"), (200, {}, QWEN.read_bytes())]
    client = StreamClient(url)

    async def first_then_stop() -> list[object]:
        seen: list[object] = []
        async for event in client.stream({"model": "m"}):
            seen.append(event)
            if len(seen) == 3:
                break  # the generator is closed: its response and connection with it
        return seen

    assert len(asyncio.run(first_then_stop())) == 3
    again = asyncio.run(_all(client))
    assert len(script.requests) == 2 and again[-1]["type"] == "finish"


async def _all(client: StreamClient) -> list[dict[str, object]]:
    return [to_json(e) async for e in client.stream({"model": "m"})]
