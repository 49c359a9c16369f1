"""An I/O-bound scripted model for bench/scale: an OpenAI-compatible Chat Completions endpoint on loopback that
waits (default 200 ms) and then streams a finished envelope for whichever agent asked. One thread per request, in its
own process, so its work does not count against the runtime being measured.

    python bench/scale/model_server.py [SECONDS]     # prints the port it listens on
"""

from __future__ import annotations

import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

AGENT = re.compile(r"You are agent '([a-z0-9_]+)'")
DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2


def stream(agent: str) -> bytes:
    """The agent's answer as Chat Completions SSE, in pieces of 16 characters."""
    envelope = {"control_packet": {"intent_classification": {"category": "/query", "verb": "/write", "confidence": 1.0},
                                   "mangle_updates": [], "memory_operations": [], "tool_requests": []},
                "surface_response": f"{agent} wrote its part. [STATUS: SUCCESS]"}  # fmt: skip
    text = json.dumps(envelope)
    events = [{"choices": [{"index": 0, "delta": {"content": text[i : i + 16]}, "finish_reason": None}]}
              for i in range(0, len(text), 16)]  # fmt: skip
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


class Server(ThreadingHTTPServer):
    request_queue_size = 1024  # 200 runs' agents may connect at once
    daemon_threads = True


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        system = next(m["content"] for m in body["messages"] if m["role"] == "system")
        found = AGENT.search(system)
        time.sleep(DELAY)
        answer = stream(found.group(1) if found else "unknown")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_: object) -> None:
        """Quiet."""


if __name__ == "__main__":
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
