"""A real HTTP server on loopback that replays scripted provider responses."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Script:
    """Responses to serve in order, and the requests received."""

    def __init__(self, responses: list[tuple[int, dict[str, str], bytes]]) -> None:
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script([])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            script.requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": json.loads(self.rfile.read(length))}
            )
            status, headers, body = script.responses.pop(0)
            self.send_response(status)
            for name, value in {"content-type": "text/event-stream", **headers}.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            for i in range(0, len(body), 37):  # the body in small writes, as a streaming server sends it
                self.wfile.write(body[i : i + 37])
                self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    httpd.shutdown()
    httpd.server_close()
