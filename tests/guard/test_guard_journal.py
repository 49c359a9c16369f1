"""The tool journal in the MCP guard: a guard killed (SIGKILL) while it forwards a call leaves the call in doubt;
after a restart, an identical call is held for an operator instead of running again — denied when nobody approves
in time, run once more only when an operator approves (and then no longer in doubt)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from groundstate.config import default_db_url
from groundstate.guard import Ledger
from groundstate.store import ToolJournal

from .test_mcp_guard import guarded, kill_the_guard_mid_call, refusal

SERVER = Path(__file__).with_name("effect_server.py")


def test_a_call_in_flight_when_the_guard_dies_is_held_not_repeated(tmp_path: Path) -> None:
    effects, pids = tmp_path / "effects.txt", tmp_path / "effects.pids"
    config = f'[mcp]\napproval_timeout_sec = 2\n[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n'
    arguments = {"path": str(effects)}
    (tmp_path / "effects.slow").touch()  # the first call sleeps long enough to be killed mid-call

    async def first(client: ClientSession) -> Any:
        killer = threading.Thread(target=kill_the_guard_mid_call, args=(pids,), daemon=True)
        killer.start()
        with pytest.raises(Exception):  # noqa: B017 - the guard died mid-call: the client's transport fails
            await asyncio.wait_for(client.call_tool("lying__append", arguments), 20)
        killer.join(5)
        (tmp_path / "effects.slow").unlink()

    with contextlib.suppress(Exception):  # the session's own shutdown fails too, with its guard gone
        guarded(tmp_path, config, first)
    assert effects.read_text() == "ran\n"
    store = default_db_url(tmp_path / "home")
    assert [(e.tool, e.state) for e in ToolJournal(store).in_doubt("mcp:")] == [("lying/append", "intent")]

    async def again(client: ClientSession) -> str:
        return str(await refusal(client, "lying__append", arguments))

    message = guarded(tmp_path, config, again)
    assert "no operator approved the call within 2 s: an identical call to lying/append was being forwarded when " \
           "the guard stopped: it may or may not have taken effect" in message  # fmt: skip
    assert effects.read_text() == "ran\n"  # not run again
    assert ToolJournal(store).in_doubt("mcp:")  # nobody decided: still in doubt

    ledger = Ledger(store)

    def approve() -> None:
        for _ in range(200):
            held = ledger.entries("held")
            if held:
                ledger.decide(held[0].id, True, "dana", held[0].digest)
                return
            time.sleep(0.05)

    async def approved(client: ClientSession) -> str:
        approver = threading.Thread(target=approve, daemon=True)
        approver.start()
        result = await client.call_tool("lying__append", arguments)
        approver.join(5)
        return result.content[0].text  # type: ignore[union-attr]

    waiting = config.replace("approval_timeout_sec = 2", "approval_timeout_sec = 30")
    assert guarded(tmp_path, waiting, approved) == "appended"  # the operator's choice: it runs once more
    assert effects.read_text() == "ran\nran\n"
    assert ToolJournal(store).in_doubt("mcp:") == []  # resolved by the approval
    assert ledger.entries()[0].operator == "dana"


def test_a_call_sent_again_with_its_idempotency_key_gets_the_recorded_result(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    config = f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n'
    arguments = {"path": str(effects)}
    key: Any = {"groundstate/idempotency_key": "order-4711"}  # the SDK's meta type names only MCP's own keys
    other: Any = {"groundstate/idempotency_key": "order-4712"}
    empty: Any = {"groundstate/idempotency_key": ""}

    async def use(client: ClientSession) -> list[str]:
        first = await client.call_tool("lying__append", arguments, meta=key)
        again = await client.call_tool("lying__append", arguments, meta=key)  # a retry: not run again
        another = await client.call_tool("lying__append", arguments, meta=other)
        with pytest.raises(MCPError, match="must be printable text"):
            await client.call_tool("lying__append", arguments, meta=empty)
        with pytest.raises(MCPError, match=r"'order-4711' was used for another call \(lying/append with other "
                                           r"arguments\): a key names one call") as reused:
            await client.call_tool("lying__append", {"path": str(effects), "note": "other"}, meta=key)
        assert reused.value.error.code == -32602
        return [r.content[0].text for r in (first, again, another)]  # type: ignore[union-attr]

    assert guarded(tmp_path, config, use) == ["appended", "appended", "appended"]
    assert effects.read_text() == "ran\nran\n"  # the key's call ran once; another key's once
    assert guarded(tmp_path, config, lambda client: client.call_tool("lying__append", arguments, meta=key)).content[
        0].text == "appended"  # fmt: skip
    assert effects.read_text() == "ran\nran\n"  # and not after the guard restarted either


def test_an_identical_call_while_another_guard_forwards_one_is_not_in_doubt(tmp_path: Path) -> None:
    """Two clients, each with its own guard on the same store (as two editor windows are): while one guard forwards
    a call, the same call through the other is just another call — forwarded, not held as if the first had died."""
    effects, pids = tmp_path / "effects.txt", tmp_path / "effects.pids"
    (tmp_path / "groundstate.toml").write_text(f'[mcp]\napproval_timeout_sec = 2\n[mcp.servers.lying]\ncommand = '
                                               f'["{sys.executable}", "{SERVER}"]\n')  # fmt: skip
    params = StdioServerParameters(command=sys.executable, args=["-m", "groundstate", "mcp", "serve"],
                                   cwd=str(tmp_path), env={"GROUNDSTATE_HOME": str(tmp_path / "home"),
                                                           "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")},
                                   )  # fmt: skip
    arguments = {"path": str(effects)}
    (tmp_path / "effects.slow").touch()  # the first call stays in flight

    answered: list[str] = []

    async def both() -> None:
        async with contextlib.AsyncExitStack() as stack:
            sessions = []
            for _ in range(2):
                read, write = await stack.enter_async_context(stdio_client(params))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                sessions.append(session)
            first = asyncio.create_task(sessions[0].call_tool("lying__append", arguments))
            for _ in range(400):  # until the first call is upstream (its intent journaled before it went)
                if pids.exists() and pids.read_text():
                    break
                await asyncio.sleep(0.05)
            (tmp_path / "effects.slow").unlink()
            try:
                second = await asyncio.wait_for(sessions[1].call_tool("lying__append", arguments), 20)
                answered.append(("refused: " if second.is_error else "") + second.content[0].text)  # type: ignore[union-attr]
            except MCPError as failed:
                answered.append(f"failed: {failed}")
            guard, server = (int(pid) for pid in pids.read_text().split())
            first.cancel()
            for pid in (server, guard):  # the first call's upstream still sleeps: stopped with its guard
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    with contextlib.suppress(Exception):  # the first session's shutdown fails, its guard gone
        asyncio.run(asyncio.wait_for(both(), 60))
    assert answered == ["appended"]
    assert effects.read_text() == "ran\nran\n"  # both calls ran
    statuses = sorted(entry.status for entry in Ledger(default_db_url(tmp_path / "home")).entries())
    assert statuses == ["permit", "permit"]  # neither held for an operator


def test_the_answer_does_not_wait_for_its_result_to_be_journaled_and_a_retry_waits_for_it(tmp_path: Path) -> None:
    """A forwarded call's result is journaled after its answer went out (bench/mcp: ~0.2 ms less per call): while
    another connection holds the store's write lock, the client still has its answer at once. (The guard runs as its
    PID namespace's first process, so it keeps no history for a next guard: a kept result is written before the
    answer, and would wait for the lock — docs/provenance.md.) The same call sent
    again with its idempotency key waits until that result is journaled, and gets it — not the intent alone, which
    would read as a call in doubt — and nothing runs twice."""
    effects, pids, gate = tmp_path / "effects.txt", tmp_path / "effects.pids", tmp_path / "effects.gate"
    config = f'[mcp.servers.lying]\ncommand = ["{sys.executable}", "{SERVER}"]\n'
    arguments = {"path": str(effects)}
    key: Any = {"groundstate/idempotency_key": "order-4711"}  # the SDK's meta type names only MCP's own keys
    gate.touch()  # the first call is answered when the test says

    async def use(client: ClientSession) -> list[Any]:
        first = asyncio.create_task(client.call_tool("lying__append", arguments, meta=key))
        for _ in range(400):  # until the call is upstream: its intent is journaled
            if pids.exists() and pids.read_text():
                break
            await asyncio.sleep(0.05)
        store = sqlite3.connect(tmp_path / "home" / "groundstate.db", timeout=10, isolation_level=None)
        try:
            store.execute("BEGIN IMMEDIATE")  # the store's write lock, held by another connection
            gate.unlink()
            answered = await asyncio.wait_for(first, 5)  # while the lock is still held
            await asyncio.sleep(0.6)  # the result's transaction now asks for the lock only every 100 ms (SQLite's)
            again = asyncio.create_task(client.call_tool("lying__append", arguments, meta=key))
            await asyncio.sleep(0.05)  # the retry's would ask every few: it would take the lock first if it could
            waiting = not again.done()
        finally:
            store.close()  # the lock released
        retried = await asyncio.wait_for(again, 20)
        return [answered.content[0].text, waiting, retried.content[0].text]  # type: ignore[union-attr]

    unshared = ["unshare", "--pid", "--fork", "--mount-proc"]
    assert guarded(tmp_path, config, use, wrapper=unshared) == ["appended", True, "appended"]
    assert effects.read_text() == "ran\n"  # the retry got the recorded result: nothing ran twice
    entries = ToolJournal(default_db_url(tmp_path / "home")).entries("mcp:")
    assert [(entry.tool, entry.state) for entry in entries] == [("lying/append", "done")]
