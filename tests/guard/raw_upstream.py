"""An MCP server written by hand, line by line, so that it can misbehave the way no SDK server would. Its one tool,
``probe``, does what its ``act`` argument says; before answering it writes whatever the argument ``before`` lists
(raw lines: garbage, a deep nest, an answer to a request nobody sent, a request of its own). Everything it reads is
appended to the file named by ``RAW_UPSTREAM_LOG`` (one JSON line each), so a test can see what the guard sent it.

Acts: ``echo`` (answers ``text``), ``structured`` (answers it as text and as ``structuredContent``), ``env``
(answers its environment's names), ``slow`` (answers after 30 s unless cancelled), ``not-a-result`` (a result
that is no tool result), ``listing`` (a text of two characters beside structured content of ``count`` items),
``error`` (a JSON-RPC error), ``die`` (exits without answering), ``surrogate`` (text with
a lone surrogate), ``endless`` (``megabytes`` of a line that never ends), ``brackets`` (text of ``count`` opening
brackets), ``flood`` (``count`` pings of its own, each id ``size`` characters long, then the answer, then reads
nothing more for ``seconds``). ``tools/list`` answers in two pages (one tool whose description is a lone surrogate
when ``RAW_UPSTREAM_SURROGATE_TOOL`` is set). ``RAW_UPSTREAM_CHILD``: Python code it starts as a process of its own;
with ``RAW_UPSTREAM_EXIT`` set, it exits at once after that (the child keeping its output open).
``RAW_UPSTREAM_ON_EOF``: a directory where, once its input ends, it notes ``eof.PID``, then, 0.3 s later (a server
cleaning up), ``clean.PID`` — what a server stopped as a client should (input closed first) gets to do."""

from __future__ import annotations

import json
import os
import subprocess
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


def misbehave(act: str, number: object, arguments: dict[str, Any]) -> None:
    if act == "surrogate":  # a lone surrogate, as the JSON escape any parser reads (json.dumps writes it so)
        write({"jsonrpc": "2.0", "id": number, "result": {"content": [{"type": "text", "text": "lone \ud800"}]}})
        return
    with lock:  # endless: a line that never ends
        for _ in range(int(arguments.get("megabytes", 70))):
            sys.stdout.buffer.write(b"x" * (1 << 20))
        sys.stdout.buffer.flush()
    time.sleep(30)


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
    if act in ("surrogate", "endless"):
        misbehave(act, number, arguments)
        return
    if act == "brackets":  # a long string of brackets: data, however it looks
        arguments = {"text": "[" * int(arguments.get("count", 10_000_000))}
    if act == "pid":  # who it is: the process the guard (or its keeper) started
        arguments = {"text": str(os.getpid())}
    if act == "not-a-result":
        write({"jsonrpc": "2.0", "id": number, "result": {"content": "not a list"}})
        return
    write({"jsonrpc": "2.0", "id": number, "result": answer(act, arguments)})


def answer(act: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool result of an act that answers."""
    if act == "listing":  # a short text beside a large structured content
        return {"content": [{"type": "text", "text": "ok"}],
                "structuredContent": {"items": [f"item-{n:08d}" for n in range(int(arguments.get("count", 0)))]}}
    text = " ".join(sorted(os.environ)) if act == "env" else str(arguments.get("text", ""))
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if act == "structured":
        result["structuredContent"] = {"text": text}
    return result


if os.environ.get("RAW_UPSTREAM_CHILD"):  # a process of its own to start (and maybe lose track of)
    subprocess.Popen([sys.executable, "-c", os.environ["RAW_UPSTREAM_CHILD"]])
    if os.environ.get("RAW_UPSTREAM_EXIT"):
        os._exit(0)

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
        if os.environ.get("RAW_UPSTREAM_SURROGATE_TOOL"):  # a description no UTF-8 can carry
            bad = {"name": "bad", "description": "\ud800", "inputSchema": {"type": "object"}}
            write({"jsonrpc": "2.0", "id": number, "result": {"tools": [bad]}})
            continue
        if page == 0:
            listed["nextCursor"] = "page-2"
        write({"jsonrpc": "2.0", "id": number, "result": listed})
    elif method == "tools/call" and (message["params"].get("arguments") or {}).get("act") == "flood":
        flood = message["params"]["arguments"]  # asks and asks, and never reads the answers
        for ping in range(int(flood.get("count", 10_000))):
            write({"jsonrpc": "2.0", "id": f"{ping}-" + "p" * int(flood.get("size", 10_000)), "method": "ping"})
        write({"jsonrpc": "2.0", "id": number, "result": {"content": [{"type": "text", "text": "flooded"}]}})
        time.sleep(float(flood.get("seconds", 30)))
    elif method == "tools/call":
        threading.Thread(target=call, args=(number, message["params"].get("arguments") or {}), daemon=True).start()
    elif method == "notifications/cancelled":
        cancelled.add(message["params"]["requestId"])

if os.environ.get("RAW_UPSTREAM_ON_EOF"):  # its input ended: the client is done with it, and it cleans up
    noted = os.path.join(os.environ["RAW_UPSTREAM_ON_EOF"], "{}." + str(os.getpid()))
    open(noted.format("eof"), "w").close()
    time.sleep(0.3)
    open(noted.format("clean"), "w").close()
