"""``tools/call`` over stdio is answered by the guard itself (``guard/fast_calls.py``) once the client's handshake
is done; before it, and for anything this path does not take whole, the SDK's server answers as it always did. The
two must be indistinguishable to a client: the same results, refusals and errors, sieved to the protocol version
the handshake settled on. Calls written just before the client closes its input are all answered; a regular file
as input is served too. Driven through ``groundstate mcp serve`` over raw JSON-RPC on stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .test_upstream_wire import RAW, probe

ENV_NAMES = ("GROUNDSTATE_HOME", "GROUNDSTATE_CONFIG")


def configure(tmp_path: Path) -> dict[str, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "deny.mg").write_text('mcp_denied(C, "not that text") :- mcp_argument(C, "text", "forbidden").\n')
    (tmp_path / "groundstate.toml").write_text(f'[mcp]\npolicy = ["deny.mg"]\n'
                                               f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "{RAW}"]\n')
    return {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"),
            "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")}  # fmt: skip


def hello(version: str = "2025-06-18", initialized: bool = True) -> list[dict[str, Any]]:
    opening: list[dict[str, Any]] = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}]
    return opening + ([{"jsonrpc": "2.0", "method": "notifications/initialized"}] if initialized else [])


def raw_lines(tmp_path: Path, text: str, timeout: float = 60) -> tuple[list[dict[str, Any]], str]:
    """``text`` written as is, the input closed: the guard's messages and its stderr."""
    done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve"], input=text, capture_output=True,
                          text=True, env=configure(tmp_path), cwd=tmp_path, timeout=timeout)  # fmt: skip
    assert "Traceback" not in done.stderr and "Task exception" not in done.stderr, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def launched(tmp_path: Path) -> subprocess.Popen[str]:
    """The guard, its pipes open for the test to write, read and close."""
    return subprocess.Popen([sys.executable, "-m", "groundstate", "mcp", "serve"], env=configure(tmp_path),
                            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def served(tmp_path: Path, messages: list[dict[str, Any]], version: str = "2025-06-18", initialized: bool = True,
           tail: str = "") -> dict[Any, dict[str, Any]]:
    """Every message written at once and the input closed: the guard's answers by id (each id answered once)."""
    text = "".join(json.dumps(m) + "\n" for m in hello(version, initialized) + messages) + tail
    replies, _ = raw_lines(tmp_path, text, timeout=120)
    ids = [reply["id"] for reply in replies if "id" in reply]
    assert len(ids) == len(set(ids)), ids
    return {reply["id"]: reply for reply in replies if "id" in reply}


CALLS: list[dict[str, Any]] = [
    probe(2, text="hello"),
    probe(3, text="forbidden"),  # denied by the policy
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nobody__lists_this", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": 5}},  # malformed: the SDK answers
    {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
     "params": {"name": "raw__probe", "arguments": {}, "_meta": {"groundstate/request": 7}}},
    probe(7, text="both", act="structured"),
    {"jsonrpc": "2.0", "id": "7", "method": "tools/call", "params": {"name": "raw__probe",
                                                                     "arguments": {"text": "a string id"}}},
]  # fmt: skip


def comparable(reply: dict[str, Any]) -> dict[str, Any]:
    """A reply without what differs from one guard to the next (ledger entries, call ids, digests of them)."""
    decision = ((reply.get("result") or {}).get("_meta") or {}).get("groundstate/decision")
    if decision:
        for varying in ("entry", "call", "why", "digest"):
            decision.pop(varying, None)
    return reply


def test_calls_written_just_before_the_input_closes_are_all_answered(tmp_path: Path) -> None:
    replies = served(tmp_path, CALLS)
    assert set(replies) == {1, 2, 3, 4, 5, 6, 7, "7"}
    assert replies[2]["result"] == {"content": [{"type": "text", "text": "hello"}], "isError": False}
    assert replies[3]["result"]["isError"] and "not that text" in replies[3]["result"]["content"][0]["text"]
    assert replies[4]["error"]["code"] == -32602 and "nobody__lists_this" in replies[4]["error"]["message"]
    assert replies[5]["error"] == {"code": -32602, "message": "Invalid request parameters", "data": ""}
    assert replies[6]["error"]["message"] == "_meta.groundstate/request must be text (the user's request)"
    assert replies[7]["result"]["structuredContent"] == {"text": "both"}
    assert replies["7"]["result"]["content"][0]["text"] == "a string id"


def conversed(tmp_path: Path, messages: list[dict[str, Any]], version: str, initialized: bool) -> dict[Any, Any]:
    """Every message written at once, the input kept open until each request is answered: the answers by id."""
    guard = launched(tmp_path)
    assert guard.stdin is not None and guard.stdout is not None
    sent = hello(version, initialized) + messages
    guard.stdin.write("".join(json.dumps(m) + "\n" for m in sent))
    guard.stdin.flush()
    waiting, replies = {m["id"] for m in sent if "id" in m}, {}
    for line in guard.stdout:
        reply = json.loads(line)
        if "id" in reply:
            assert reply["id"] not in replies, reply
            replies[reply["id"]] = reply
            waiting.discard(reply["id"])
        if not waiting:
            break
    _, err = guard.communicate(timeout=60)
    assert not waiting and "Traceback" not in err, (waiting, err)
    return replies


def test_the_guards_own_path_and_the_sdks_answer_alike(tmp_path: Path) -> None:
    """Without ``notifications/initialized`` every call goes to the SDK's server (it accepts calls once it has
    answered ``initialize``); with it, the guard's own path answers. The answers are the same."""
    for version in ("2025-06-18", "2024-11-05"):
        own = conversed(tmp_path / f"own-{version}", CALLS, version, initialized=True)
        sdk = conversed(tmp_path / f"sdk-{version}", CALLS, version, initialized=False)
        assert own.keys() == sdk.keys()
        for number in own:
            assert comparable(own[number]) == comparable(sdk[number]), (version, number)
    assert "resultType" not in own[2]["result"]  # the 2026 era's field, which the model fills: sieved away


def test_a_long_line_and_a_last_line_without_its_newline_are_read(tmp_path: Path) -> None:
    text = "x" * 300_000  # several of the transport's 64 KiB reads
    replies = served(tmp_path, [probe(2, text=text)], tail=json.dumps(probe(3, text="no newline after me")))
    assert replies[2]["result"]["content"][0]["text"] == text
    assert replies[3]["result"]["content"][0]["text"] == "no newline after me"


def test_requests_in_a_regular_file_are_served(tmp_path: Path) -> None:
    """Input from a file and output to a file, which the event loop cannot watch: the threaded reader and writer,
    the guard's answers and the SDK's written whole, one after the other."""
    requests, out = tmp_path / "requests.jsonl", tmp_path / "answers.jsonl"
    requests.write_text("".join(json.dumps(m) + "\n" for m in [*hello(), probe(2, text="from a file")]))
    with requests.open() as given, out.open("w") as taken:
        done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve"], stdin=given, stdout=taken,
                              stderr=subprocess.PIPE, text=True, env=configure(tmp_path), cwd=tmp_path,
                              timeout=120)  # fmt: skip
    assert "Traceback" not in done.stderr
    replies = {m["id"]: m for m in map(json.loads, out.read_text().splitlines()) if "id" in m}
    assert replies[1]["result"]["serverInfo"]["name"] == "groundstate-guard"
    assert replies[2]["result"]["content"][0]["text"] == "from a file"


def lines(*messages: dict[str, Any]) -> str:
    return "".join(json.dumps(m) + "\n" for m in [*hello(), *messages])


def test_a_call_cancelled_before_it_ran_is_never_answered(tmp_path: Path) -> None:
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    replies, _ = raw_lines(tmp_path, lines(probe(2, act="slow"), cancel, probe(3, text="after")))
    assert [m["id"] for m in replies if "id" in m] == [1, 3]


def test_a_cancellation_spelled_with_escapes_still_cancels(tmp_path: Path) -> None:
    """JSON may write ``/`` as ``\\/`` and any letter as ``\\u00XX``: the same method, which the line's first look
    must not miss."""
    escaped = '{"jsonrpc": "2.0", "method": "notifications\\/cancell\\u0065d", "params": {"requestId": 2}}\n'
    guard = launched(tmp_path)
    assert guard.stdin is not None and guard.stdout is not None
    guard.stdin.write(lines(probe(2, act="slow")))
    guard.stdin.flush()
    time.sleep(2)  # the call is running at the upstream
    guard.stdin.write(escaped + json.dumps(probe(3, text="next")) + "\n")
    guard.stdin.flush()
    started = time.monotonic()
    replies = []
    for line in guard.stdout:
        replies.append(json.loads(line))
        if replies[-1].get("id") == 3:
            break
    _, err = guard.communicate(timeout=60)
    assert [m["id"] for m in replies if "id" in m] == [1, 3] and time.monotonic() - started < 20
    assert "Traceback" not in err


def test_what_only_looks_like_a_call_is_left_to_the_sdk(tmp_path: Path) -> None:
    """A call in the 2026 era's envelope on a handshake session, a request named like the cancellation notification,
    a request that also carries an ``error``: none is taken for a call to forward."""
    enveloped = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "raw__probe", "arguments": {"text": "enveloped"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}
    slow = probe(3, act="slow")
    named = {"jsonrpc": "2.0", "id": 4, "method": "notifications/cancelled", "params": {"requestId": 3}}
    with_error = {**probe(5, text="with an error"), "error": {"code": 1, "message": "m"}}
    replies, _ = raw_lines(tmp_path, lines(enveloped, slow, named, with_error), timeout=120)
    by_id = {m["id"]: m for m in replies if "id" in m}
    assert by_id[2]["error"]["code"] == -32600  # the SDK refuses the envelope on a handshake session
    assert by_id[4]["error"]["code"] == -32601  # a request of that name: no such method
    assert by_id[3]["error"] == {"code": -32000, "message": "Connection closed"}  # not cancelled by it: ran on
    assert 5 not in by_id
    seen = (tmp_path / "seen.jsonl").read_text() if (tmp_path / "seen.jsonl").exists() else ""
    assert "enveloped" not in seen and "with an error" not in seen


def test_a_request_id_no_utf8_can_carry_is_answered_escaped(tmp_path: Path) -> None:
    text = lines() + '{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/call", "params": {"name": "raw__probe"}}\n'
    done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve"], input=text.encode(),
                          capture_output=True, env=configure(tmp_path), cwd=tmp_path, timeout=60)  # fmt: skip
    assert b"Traceback" not in done.stderr, done.stderr
    assert b'"id":"\\ud800"' in done.stdout  # escaped: the line stays UTF-8


def test_a_client_that_leaves_with_calls_in_flight_ends_the_guard_quietly(tmp_path: Path) -> None:
    guard = launched(tmp_path)
    assert guard.stdin is not None and guard.stdout is not None and guard.stderr is not None
    guard.stdin.write(lines(*(probe(n, text=f"call {n}") for n in range(2, 32))))
    guard.stdin.flush()
    guard.stdout.close()  # the client stops reading and goes
    time.sleep(1)
    guard.stdin.close()
    assert guard.wait(timeout=30) is not None
    err = guard.stderr.read()
    assert "Traceback" not in err and "Task exception" not in err and "pipe closed by peer" not in err, err


def test_a_client_that_stops_reading_does_not_hold_the_guard_forever(tmp_path: Path) -> None:
    """Forty answers of ~900 KB nobody reads, then the input closed: the guard gives up on the client and ends."""
    guard = launched(tmp_path)
    assert guard.stdin is not None
    guard.stdin.write(lines(*(probe(n, text="y" * 900_000) for n in range(2, 42))))
    guard.stdin.close()
    try:
        guard.wait(timeout=60)
    finally:
        guard.kill()
    assert guard.returncode == 0


def test_a_client_line_that_never_ends_ends_the_session(tmp_path: Path) -> None:
    guard = subprocess.Popen([sys.executable, "-m", "groundstate", "mcp", "serve"], env=configure(tmp_path),
                             cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert guard.stdin is not None and guard.stderr is not None
    guard.stdin.write(lines().encode())
    try:
        for _ in range(80):
            guard.stdin.write(b"x" * (1 << 20))
    except BrokenPipeError:
        pass  # the guard stopped reading: as it should
    guard.wait(timeout=60)
    err = guard.stderr.read().decode()
    assert "the client wrote a line longer than 67108864 bytes" in err and "Traceback" not in err
