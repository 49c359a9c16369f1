"""The one test HTTP server: real HTTP on loopback, answering each POST (and GET, with an empty body) with what the
test's script decides.

Provider tests replay recorded-format streams through it; runtime tests put a scripted model behind it. Each
keeps its own script (what to answer); the serving — threads, headers, writes in pieces, a client that hangs
up — lives here once.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """One response: status, headers, body; ``chunk`` writes the body in pieces of that size, as a streaming
    server sends it; ``delay`` waits before answering; ``pace`` waits between pieces (a model generating)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/event-stream"})
    body: bytes = b""
    chunk: int | None = None
    delay: float = 0.0
    pace: float = 0.0


Respond = Callable[[str, dict[str, str], bytes], Reply]  # (path, headers, body) -> the reply


@contextmanager
def loopback(respond: Respond) -> Iterator[str]:
    """Serve ``respond`` on 127.0.0.1 (a free port) until the block ends; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self._answer(self.rfile.read(int(self.headers.get("content-length", 0))))

        def do_GET(self) -> None:
            self._answer(b"")

        def _answer(self, raw: bytes) -> None:
            reply = respond(self.path, dict(self.headers), raw)
            time.sleep(reply.delay)
            try:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                step = reply.chunk or max(len(reply.body), 1)
                for i in range(0, len(reply.body), step):
                    if i and reply.pace:
                        time.sleep(reply.pace)
                    self.wfile.write(reply.body[i : i + step])
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away mid-response (some tests kill it on purpose)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


Answer = Callable[[socket.socket], None]  # writes what the upstream sends to one connection


def read_request(connection: socket.socket) -> bytes | None:
    """One request read whole from ``connection`` (its head, and the body its Content-Length declares): its head,
    or None if the connection closed before it began."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += (piece := connection.recv(65536))
        if not piece:
            if not data:
                return None
            raise ConnectionAbortedError("the client closed before its request was whole")
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
    while len(body) < length:
        body += connection.recv(65536)
    return head


@contextmanager
def raw_loopback(answer: Answer, received: list[bytes] | None = None, concurrent: bool = False) -> Iterator[str]:
    """A TCP server on loopback for what an HTTP library would not send (a reset mid-body, a malformed head, a
    stall): it reads each request whole (``read_request``; each head added to ``received``), then hands the socket
    to ``answer``, one connection at a time — or, ``concurrent``, each connection in a thread of its own; yields the
    base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve_one(connection: socket.socket) -> None:
        with connection, suppress(OSError):  # the client went away first, or sent too little in 5 s
            connection.settimeout(5)
            head = read_request(connection)
            if head is None:
                raise ConnectionAbortedError("the client closed before its request was whole")
            if received is not None:
                received.append(head)
            answer(connection)

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            if concurrent:
                threading.Thread(target=serve_one, args=(connection,), daemon=True).start()
            else:
                serve_one(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
