"""An MCP server written by hand, line by line, so that it can misbehave the way no SDK server would. Its one tool,
``probe``, does what its ``act`` argument says; before answering it writes whatever the argument ``before`` lists
(raw lines: garbage, a deep nest, an answer to a request nobody sent, a request of its own). Everything it reads is
appended to the file named by ``RAW_UPSTREAM_LOG`` (one JSON line each), so a test can see what the guard sent it.

Acts: ``echo`` (answers ``text``), ``structured`` (answers it as text and as ``structuredContent``), ``env``
(answers its environment's names), ``slow`` (answers after 30 s unless cancelled), ``not-a-result`` (a result
that is no tool result), ``error`` (a JSON-RPC error), ``die`` (exits without answering). ``tools/list`` answers
in two pages."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

LOG = os.environ.get("RAW_UPSTREAM_LOG")
TOOLS = [{"name": "probe", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
         {"name": "second_page", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]
cancelled: set[object] = set()
lock = threading.Lock()


def write(message: object) -> None:
    """One line: a message, raw text, or raw bytes (text starting ``hex:``)."""
    text = message if isinstance(message, str) else json.dumps(message)
    with lock:
        sys.stdout.flush()
        if text.startswith("hex:"):
            sys.stdout.buffer.write(bytes.fromhex(text[4:]) + b"\n")
        else:
            sys.stdout.buffer.write(text.encode("utf-8") + b"\n")
        sys.stdout.buffer.flush()


def log(message: object) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as out:
            out.write(json.dumps(message) + "\n")


def call(number: object, arguments: dict[str, Any]) -> None:
    for line in arguments.get("before", []):
        write(line)
    act = arguments.get("act", "echo")
    if act == "die":
        os._exit(3)
    if act == "slow":
        for _ in range(300):
            if number in cancelled:
                return
            time.sleep(0.1)
    if act == "error":
        write({"jsonrpc": "2.0", "id": number, "error": {"code": -32050, "message": "the probe refuses"}})
        return
    if act == "not-a-result":
        write({"jsonrpc": "2.0", "id": number, "result": {"content": "not a list"}})
        return
    text = " ".join(sorted(os.environ)) if act == "env" else str(arguments.get("text", ""))
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if act == "structured":
        result["structuredContent"] = {"text": text}
    write({"jsonrpc": "2.0", "id": number, "result": result})


for raw in sys.stdin:
    message = json.loads(raw)
    log(message)
    method, number = message.get("method"), message.get("id")
    if method == "initialize":
        write({"jsonrpc": "2.0", "id": number, "result": {"protocolVersion": "2025-06-18", "capabilities": {
            "tools": {}}, "serverInfo": {"name": "raw", "version": "0"}}})
    elif method == "tools/list":
        page = 1 if (message.get("params") or {}).get("cursor") == "page-2" else 0
        listed: dict[str, Any] = {"tools": [TOOLS[page]]}
        if page == 0:
            listed["nextCursor"] = "page-2"
        write({"jsonrpc": "2.0", "id": number, "result": listed})
    elif method == "tools/call":
        threading.Thread(target=call, args=(number, message["params"].get("arguments") or {}), daemon=True).start()
    elif method == "notifications/cancelled":
        cancelled.add(message["params"]["requestId"])
