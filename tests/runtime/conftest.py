"""A scripted OpenAI-compatible model on loopback (a provider test double), answering per agent.

Each agent has a list of envelopes; the n-th request from that agent gets the n-th (the last one repeats) — or,
with ``by_round``, the answer for the request's round of the conversation, so that several runs get the same
script. The server streams them as Chat Completions SSE, split into small chunks, optionally after a delay.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundstate.runtime import EventStore, Runtime, make_backend

from ..loopback import Reply, loopback
from ..postgres import postgres  # noqa: F401 (a fixture for the Postgres and cluster tests)

_AGENT = re.compile(r"You are agent '([a-z0-9_]+)'")


def envelope(surface: str, tools: list[dict[str, str]] | None = None, **packet: Any) -> dict[str, Any]:
    return {"control_packet": {"intent_classification": {"category": "/query", "verb": "/research",
                                                         "confidence": 0.9},
                               "mangle_updates": [], "memory_operations": [], "tool_requests": tools or [], **packet},
            "surface_response": surface}  # fmt: skip


def sse(text: str) -> bytes:
    chunks = [text[i : i + 7] for i in range(0, len(text), 7)]
    out: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
                                 for c in chunks]  # fmt: skip
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in out) + b"data: [DONE]\n\n"


class Script:
    def __init__(self) -> None:
        self.answers: dict[str, list[Any]] = {}  # agent or model -> envelopes, raw strings, SSE bytes, (status, body)
        self.delays: dict[str, float | list[float]] = {}  # agent or model -> seconds before the answer (or per answer)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.by_round = False
        self.lock = threading.Lock()

    def next(self, agent: str, body: dict[str, Any]) -> Any:
        with self.lock:
            answers = self.answers.get(str(body.get("model")), self.answers.get(agent))  # by model, else by agent
            assert answers is not None, f"no answer scripted for {agent}"
            return answers[min(self.index(agent, body), len(answers) - 1)]

    def index(self, agent: str, body: dict[str, Any]) -> int:
        """Which answer a request gets: its round (``by_round``), else how many the agent asked before."""
        served = sum(1 for a, _ in self.requests if a == agent)
        return (len(body["messages"]) - 2) // 2 if self.by_round else served - 1

    def delay(self, agent: str, body: dict[str, Any]) -> float:
        """Seconds before the answer: one for every answer, or a list by answer."""
        delay = self.delays.get(str(body.get("model")), self.delays.get(agent, 0))
        if isinstance(delay, list):
            with self.lock:
                return delay[min(self.index(agent, body), len(delay) - 1)]
        return delay


@pytest.fixture
def model() -> Iterator[tuple[str, Script]]:
    """A scripted model behind the loopback server: each agent (named in its system prompt) gets its answers."""
    script = Script()

    def respond(_path: str, _headers: dict[str, str], raw: bytes) -> Reply:
        body = json.loads(raw)
        system = next(m["content"] for m in body["messages"] if m["role"] == "system")
        agent = _AGENT.search(system).group(1)  # type: ignore[union-attr]
        with script.lock:
            script.requests.append((agent, body))
        answer = script.next(agent, body)
        delay = script.delay(agent, body)
        if isinstance(answer, tuple):
            status, payload = answer
            return Reply(status, {"content-type": "application/json"}, payload, delay=delay)
        if isinstance(answer, bytes):
            return Reply(body=answer, delay=delay)  # a raw SSE body, exactly as given
        return Reply(body=sse(answer if isinstance(answer, str) else json.dumps(answer)), delay=delay)

    with loopback(respond) as url:
        yield url, script


@pytest.fixture
def other() -> Iterator[tuple[str, list[dict[str, object]]]]:
    """A second provider: every request answered with a finished brief, every request kept."""
    seen: list[dict[str, object]] = []

    def respond(_path: str, _headers: dict[str, str], raw: bytes) -> Reply:
        seen.append(json.loads(raw))
        return Reply(body=sse(json.dumps(envelope("From the other model. [STATUS: SUCCESS]"))))

    with loopback(respond) as url:
        yield url, seen


@pytest.fixture
def runtime(tmp_path: Path, model: tuple[str, Script]) -> Runtime:
    url, _ = model
    store = EventStore(f"sqlite:///{tmp_path / 'gs.db'}")
    return Runtime(store, tmp_path, backend=make_backend(f"openai-chat:scripted@{url}"))


def console_client(port: int, home: Path) -> httpx.Client:
    """A client of the console ``groundstate serve`` is starting on ``port`` with its state in ``home``: once the
    console answers, with the admin token it wrote as bearer."""
    token_file = home / "console.token"
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    for _ in range(300):
        if token_file.exists():
            with contextlib.suppress(httpx.TransportError):
                client.get("/login")
                break
        time.sleep(0.1)
    client.headers["authorization"] = "Bearer " + token_file.read_text().strip()
    return client
