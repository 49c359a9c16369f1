"""An MCP server over streamable HTTP written by hand (JSON answers, no SDK): what a hostile remote server may
send that the SDK's server would not. One tool, ``probe``: it answers ``text`` back, or with ``act`` = ``surrogate``
a text holding a lone surrogate (the JSON escape, which every parser reads and no UTF-8 can carry)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

PROBE = {"name": "probe", "description": "answers back", "inputSchema": {"type": "object"},
         "annotations": {"readOnlyHint": True}}  # fmt: skip


def _result(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw-http", "version": "0"}}  # fmt: skip
    if method == "tools/list":
        return {"tools": [PROBE]}
    if method == "tools/call":
        arguments = params.get("arguments") or {}
        text = "lone \ud800" if arguments.get("act") == "surrogate" else str(arguments.get("text", ""))
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        if "id" not in message:  # a notification: accepted, nothing to answer
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"],
                           "result": _result(message["method"], message.get("params") or {})}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # no stream of the server's own requests
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def raw_http_upstream() -> Iterator[str]:
    """Serve on 127.0.0.1 (a free port) until the block ends; yields the server's MCP URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
