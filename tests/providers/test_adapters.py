"""Provider transcripts (OpenAI Chat Completions and Responses, Anthropic Messages, Ollama).

Each is parsed whole, byte by byte, at random splits, and through the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.providers import (
    FINISH_REASONS,
    AnthropicAdapter,
    OllamaAdapter,
    OpenAIChatAdapter,
    OpenAIResponsesAdapter,
    StreamAdapter,
    merge_deltas,
    to_json,
)

from ..pieces import split_at

HERE = Path(__file__).parent / "transcripts"
ADAPTERS: dict[str, Callable[[], StreamAdapter]] = {
    "openai-chat": OpenAIChatAdapter,
    "openai-responses": OpenAIResponsesAdapter,
    "anthropic": AnthropicAdapter,
    "ollama": OllamaAdapter,
}
TRANSCRIPTS = sorted([*HERE.glob("*/*.sse"), *HERE.glob("*/*.ndjson")])


def events(path: Path, body: bytes, cuts: Sequence[int] = ()) -> list[dict[str, Any]]:
    adapter = ADAPTERS[path.parent.name]()
    out = [e for piece in split_at(body, cuts) for e in adapter.feed(piece)] + adapter.close()
    return [to_json(e) for e in merge_deltas(out)]


def expected(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.with_suffix(".expected").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
def test_transcript(path: Path) -> None:
    body = path.read_bytes()
    assert events(path, body) == expected(path)
    assert all(e["reason"] in FINISH_REASONS for e in expected(path) if e["type"] == "finish")
    assert events(path, body, list(range(len(body)))) == expected(path)  # one byte at a time


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(TRANSCRIPTS), st.lists(st.integers(0, 5000), max_size=10))
def test_every_split_gives_the_same_events(path: Path, cuts: list[int]) -> None:
    body = path.read_bytes()
    assert events(path, body, cuts) == events(path, body)


def test_cli_parse_stream_and_http_error(tmp_path: Path) -> None:
    path = TRANSCRIPTS[0]
    result = subprocess.run(
        [sys.executable, "-m", "groundstate", "providers", "parse", str(path), "--api", path.parent.name],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0 and [json.loads(x) for x in result.stdout.splitlines()] == expected(path)
    body = tmp_path / "error.json"
    body.write_text('{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}')
    headers = tmp_path / "headers.json"
    headers.write_text('{"retry-after-ms": "250"}')
    result = subprocess.run(
        [sys.executable, "-m", "groundstate", "providers", "parse", str(body), "--api", "openai-chat",
         "--status", "429", "--headers", str(headers)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0
    assert json.loads(result.stdout) == {
        "type": "error", "plane": "rate", "retryable": True, "retry_after_s": 0.25, "status": 429,
        "code": "rate_limit_exceeded", "message": "Rate limit reached",
    }  # fmt: skip
