"""A real HTTP server on loopback that replays scripted provider responses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ..loopback import Reply, loopback


class Script:
    """Responses to serve in order, and the requests received."""

    def __init__(self, responses: list[tuple[int, dict[str, str], bytes]]) -> None:
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    """The loopback server answering with ``script.responses`` in order, in 37-byte writes."""
    script = Script([])

    def respond(path: str, headers: dict[str, str], body: bytes) -> Reply:
        script.requests.append({"path": path, "headers": headers, "body": json.loads(body)})
        status, extra, payload = script.responses.pop(0)
        return Reply(status, {"content-type": "text/event-stream", **extra}, payload, chunk=37)

    with loopback(respond) as url:
        yield url, script
