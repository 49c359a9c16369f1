"""A raw stdio MCP server (JSON-RPC lines, no SDK) whose tools and results a scenario file gives — for attacks that
need an upstream to answer exactly as written (an error message, a result nested past the guard's bound).

    python scripted_server.py SCENARIO.json

SCENARIO: {"tools": [tool objects with annotations], "results": {tool: a result object, or {"rpc_error": {...}}},
"effects": path, "raw_id_last": {tool: a result's JSON text, written as it is, the answer's id after it}, "delay":
{tool: seconds before it answers}}. Every tools/call is written to the effects file (a JSON line) before it is
answered: a line there means the upstream received the call — the effect happened.
"""

import json
import sys
import time
from pathlib import Path

scenario = json.loads(Path(sys.argv[1]).read_text())


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    if not line.strip():
        continue
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        continue  # a notification
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": message["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": scenario["tools"]}})
    elif method == "tools/call":
        name = message["params"]["name"]
        with Path(scenario["effects"]).open("a") as effects:
            effects.write(json.dumps({"tool": name, "arguments": message["params"].get("arguments") or {}}) + "\n")
        time.sleep(scenario.get("delay", {}).get(name, 0))
        answer = scenario["results"].get(name, {"content": [{"type": "text", "text": "done"}]})
        if name in scenario.get("raw_id_last", {}):  # a result no parser here need read, the id after it
            sys.stdout.write(f'{{"jsonrpc": "2.0", "result": {scenario["raw_id_last"][name]}, "id": {ident}}}\n')
            sys.stdout.flush()
        elif "rpc_error" in answer:
            send({"jsonrpc": "2.0", "id": ident, "error": answer["rpc_error"]})
        else:
            send({"jsonrpc": "2.0", "id": ident, "result": answer})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "method not found"}})
