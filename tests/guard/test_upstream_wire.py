"""The guard's own client for stdio upstreams (``providers/mcp_stdio.py``), attacked by a server written by hand:
what it writes is data — garbage, a nest too deep, answers nobody asked for, requests of its own — and never the
guard's crash; a call whose server dies or answers with something that is no tool result fails alone; the guard's
environment does not reach the server; a call the client cancels is cancelled at the server; every page of its
tool list is read. Driven through ``groundstate mcp serve`` over raw JSON-RPC on stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .test_held_lifecycle import HELLO, answers, send

RAW = str(Path(__file__).with_name("raw_upstream.py"))


def start(tmp_path: Path, env: str = "", config: str | None = None) -> subprocess.Popen[str]:
    """The guard over the hand-written server (or the servers ``config`` names), its handshake done; the guard's
    environment holds a provider key and another secret no server may see."""
    log = tmp_path / "seen.jsonl"
    own = f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "{RAW}"]\nenv = {{ RAW_UPSTREAM_LOG = "{log}"{env} }}\n'
    (tmp_path / "groundstate.toml").write_text(config or own)
    guard = subprocess.Popen([sys.executable, "-m", "groundstate", "mcp", "serve"], cwd=tmp_path,
                             env={**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"),
                                  "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml"),
                                  "GROUNDSTATE_API_KEY": "sk-the-guards-own", "OTHER_SECRET": "x"},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
    send(guard, *HELLO)
    return guard


def ask(guard: subprocess.Popen[str], request: dict[str, Any]) -> dict[str, Any]:
    """Send ``request`` and read up to its answer: the answer."""
    send(guard, request)
    [reply] = [m for m in answers(guard, request["id"]) if m.get("id") == request["id"]]
    return reply


def probe(number: int, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": number, "method": "tools/call",
            "params": {"name": "raw__probe", "arguments": arguments}}  # fmt: skip


def finish(guard: subprocess.Popen[str]) -> str:
    _, err = guard.communicate(timeout=60)
    assert "Traceback" not in err, err
    return err


def test_what_the_server_writes_besides_its_answer_is_skipped_and_its_requests_answered(tmp_path: Path) -> None:
    guard = start(tmp_path)
    deep = "[" * 5000 + "]" * 5000
    noise = ["this is not JSON", deep, json.dumps({"jsonrpc": "2.0", "id": 999, "result": {"content": []}}),
             json.dumps({"jsonrpc": "2.0", "id": "ask-1", "method": "ping"}),
             json.dumps({"jsonrpc": "2.0", "id": "ask-2", "method": "sampling/createMessage", "params": {}}),
             json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}),
             "hex:ff fe 7b 22 c3 28", "[1, 2]", "null", "   "]  # fmt: skip
    answer = ask(guard, probe(2, text="after the noise", before=noise))
    assert answer["result"]["content"][0]["text"] == "after the noise" and not answer["result"]["isError"]
    again = ask(guard, probe(3, text="still here"))
    assert again["result"]["content"][0]["text"] == "still here"
    finish(guard)
    seen = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines()]
    replies = {m["id"]: m for m in seen if "method" not in m}
    assert replies["ask-1"]["result"] == {}  # a ping answered
    assert replies["ask-2"]["error"]["code"] == -32601  # anything else: method not found


def test_a_server_that_dies_or_answers_nonsense_fails_that_call_only(tmp_path: Path) -> None:
    guard = start(tmp_path)
    nonsense = ask(guard, probe(2, act="not-a-result"))
    assert nonsense["error"]["code"] == -32603 and "not a tool result" in nonsense["error"]["message"]
    refused = ask(guard, probe(3, act="error"))
    assert refused["error"] == {"code": -32050, "message": "the probe refuses"}
    died = ask(guard, probe(4, act="die"))
    assert died["error"]["code"] == -32603 and "the upstream server raw failed" in died["error"]["message"]
    gone = ask(guard, probe(5, text="anyone?"))
    assert "the server raw is gone" in gone["error"]["message"]
    finish(guard)


def test_the_guards_environment_does_not_reach_the_server_its_own_does(tmp_path: Path) -> None:
    guard = start(tmp_path, env=', GIVEN = "yes"')
    answer = ask(guard, probe(2, act="env"))
    names = answer["result"]["content"][0]["text"].split()
    assert "GIVEN" in names and "PATH" in names and "RAW_UPSTREAM_LOG" in names
    assert not {"GROUNDSTATE_API_KEY", "OTHER_SECRET", "GROUNDSTATE_HOME"} & set(names), names
    finish(guard)


def test_a_call_the_client_cancels_is_cancelled_at_the_server_and_never_answered(tmp_path: Path) -> None:
    guard = start(tmp_path)
    send(guard, probe(2, act="slow"))
    seen = tmp_path / "seen.jsonl"
    for _ in range(200):  # the call reached the server
        if seen.exists() and '"tools/call"' in seen.read_text():
            break
        subprocess.run(["sleep", "0.05"], check=True)
    send(guard, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    send(guard, probe(3, text="next"))
    got = list(answers(guard, 3))
    assert [m["id"] for m in got if "id" in m] == [1, 3]  # the cancelled call has no answer
    finish(guard)
    told = [json.loads(line) for line in seen.read_text().splitlines()]
    [cancel] = [m for m in told if m.get("method") == "notifications/cancelled"]
    forwarded = next(m for m in told if m.get("method") == "tools/call")
    assert cancel["params"]["requestId"] == forwarded["id"]


def test_every_page_of_the_servers_tool_list_is_read(tmp_path: Path) -> None:
    guard = start(tmp_path)
    listed = ask(guard, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert sorted(tool["name"] for tool in listed["result"]["tools"]) == ["raw__probe", "raw__second_page"]
    finish(guard)


def peak_megabytes(pid: int) -> int:
    """A live process's peak resident memory (``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


def test_a_lone_surrogate_from_the_server_fails_that_call_only(tmp_path: Path) -> None:
    """JSON may escape a lone surrogate; no UTF-8 can carry it. It crashed the guard where it tried to write it (the
    client's answer, the journal): now the answer holding it is that call's error, and the guard serves on."""
    guard = start(tmp_path)
    answer = ask(guard, probe(2, act="surrogate"))
    assert answer["error"]["code"] == -32603 and "lone surrogate" in answer["error"]["message"]
    again = ask(guard, probe(3, text="still here"))
    assert again["result"]["content"][0]["text"] == "still here"
    finish(guard)


def test_a_server_whose_tool_list_holds_a_lone_surrogate_is_left_out_and_the_others_served(tmp_path: Path) -> None:
    guard = start(tmp_path, config=f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "{RAW}"]\n'
                                   f'[mcp.servers.bad]\ncommand = ["{sys.executable}", "{RAW}"]\n'
                                   'env = { RAW_UPSTREAM_SURROGATE_TOOL = "1" }\n')
    listed = ask(guard, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert sorted(tool["name"] for tool in listed["result"]["tools"]) == ["raw__probe", "raw__second_page"]
    assert ask(guard, probe(3, text="served"))["result"]["content"][0]["text"] == "served"
    err = finish(guard)
    assert "left out mcp.servers.bad" in err and "lone surrogate" in err


def test_a_line_that_never_ends_cuts_the_server_off_at_the_bound(tmp_path: Path) -> None:
    guard = start(tmp_path)
    answer = ask(guard, probe(2, act="endless", megabytes=80))
    assert "a line longer than 67108864 bytes" in answer["error"]["message"]
    assert peak_megabytes(guard.pid) < 400, "the guard held the endless line"
    finish(guard)


def test_a_long_run_of_brackets_in_a_result_is_data_and_cheap(tmp_path: Path) -> None:
    """10 MB of ``[`` inside a string: the guard's depth scan once held ~120 bytes a character (1.3 GB here)."""
    guard = start(tmp_path)
    answer = ask(guard, probe(2, act="brackets", count=10_000_000))
    assert answer["result"]["content"][0]["text"] == "[" * 10_000_000
    assert peak_megabytes(guard.pid) < 700
    finish(guard)


def test_every_command_runs_undumpable_so_its_servers_cannot_read_its_proc_entries() -> None:
    """``PR_SET_DUMPABLE`` 0 (read back with ``PR_GET_DUMPABLE``, 3, as the command exits): a server or tool started
    as the same user cannot read the key from ``/proc/PPID/environ`` or write into the client's pipe through
    ``/proc/PPID/fd``. (Root may read any process; run servers as another user or sandboxed for that.)"""
    code = ("import atexit, ctypes, sys; libc = ctypes.CDLL(None)\n"
            "atexit.register(lambda: print('dumpable', libc.prctl(3, 0, 0, 0, 0)))\n"
            "sys.argv = ['groundstate', 'mcp', '--help']\n"
            "from groundstate.cli import main\nmain()\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().endswith("dumpable 0"), (done.stdout[-300:], done.stderr[-300:])


def test_a_lone_surrogate_from_an_http_server_fails_that_call_only(tmp_path: Path) -> None:
    """The same escape from a server over streamable HTTP (the SDK's client reads it): that call fails with an error
    the client reads, the calls before and after it are answered, and the guard ends cleanly — the SDK's complaint
    one line of its log, not a traceback quoting the server's bytes."""
    from .raw_http_upstream import raw_http_upstream

    def call(number: int, **arguments: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                "params": {"name": "web__probe", "arguments": arguments}}  # fmt: skip

    with raw_http_upstream() as url:
        guard = start(tmp_path, config=f'[mcp.servers.web]\nurl = "{url}"\n')
        assert ask(guard, call(2, text="before"))["result"]["content"][0]["text"] == "before"
        failed = ask(guard, call(3, act="surrogate"))
        assert "error" in failed and "result" not in failed, failed
        assert ask(guard, call(4, text="after"))["result"]["content"][0]["text"] == "after"
        assert guard.stdin is not None
        guard.stdin.close()
        assert guard.wait(timeout=30) == 0
        assert guard.stderr is not None
        err = guard.stderr.read()
    assert "Traceback" not in err, err
    [complaint] = [line for line in err.splitlines() if "mcp.client" in line]
    assert complaint.startswith("groundstate mcp guard: mcp.client.streamable_http: ")
    assert "ValidationError" in complaint


def _peak_kib(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def test_a_server_that_asks_and_never_reads_the_answers_costs_the_guard_no_memory(tmp_path: Path) -> None:
    """A server may send requests of its own (``ping``) and never read the answers: 100 MB of answers would wait in
    the guard's memory. Past 1 MiB unread they are no longer sent; the call is answered, the guard stays small."""
    guard = start(tmp_path)
    assert ask(guard, probe(2, text="warm"))["result"]["content"][0]["text"] == "warm"
    before = _peak_kib(guard.pid)
    flooded = ask(guard, probe(3, act="flood", count=10_000, size=10_000, seconds=20))
    assert flooded["result"]["content"][0]["text"] == "flooded"
    grown = _peak_kib(guard.pid) - before
    assert grown < 40 * 1024, f"the guard grew by {grown} KiB for 100 MB of answers nobody reads"
    finish(guard)
