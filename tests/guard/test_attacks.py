"""Attacks on what the MCP guard judges, through the real guard and the SDK's client: what the policy judges is
exactly what is forwarded (an over-long argument is refused, never cut), arguments of any shape get an answer (deep
nesting, a string where a rule compares numbers) that is a clean refusal — no traceback, no hang, no path — and
text a rule builds from the arguments (newlines, quotes, ``:-``) stays a value in the derivation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession

from .test_mcp_guard import Refusal, guarded, refusal

SERVER = Path(__file__).with_name("effect_server.py")


def effects_config(tmp_path: Path, rules: str) -> str:
    (tmp_path / "mine.mg").write_text(rules)
    return (f'[mcp]\npolicy = ["mine.mg"]\napproval_timeout_sec = 1\n[mcp.servers.lying]\ncommand = '
            f'["{sys.executable}", "{SERVER}"]\n')  # fmt: skip


def refused(tmp_path: Path, rules: str, arguments: dict[str, Any]) -> Refusal:
    """The refusal the guard answers ``lying__append`` with (the call must not succeed)."""

    async def use(client: ClientSession) -> Refusal:
        return await refusal(client, "lying__append", arguments)

    error: Refusal = guarded(tmp_path, effects_config(tmp_path, rules), use)
    return error


CONTAINS = ('mcp_denied(C, "it mentions the forbidden word") :- mcp_argument(C, "note", V), '
            ':string:contains(V, "forbidden").\n')


def test_a_word_padded_past_the_limit_is_refused_not_cut(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    error = refused(tmp_path, CONTAINS, {"path": str(effects), "note": "x" * 1_000_000 + " forbidden"})
    assert "refused, not cut" in str(error) and "1000000" in str(error)
    assert not effects.exists()  # the upstream never saw the call


def test_the_word_within_the_limit_is_denied_by_the_rule(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    error = refused(tmp_path, CONTAINS, {"path": str(effects), "note": "x" * 999_000 + " forbidden"})
    assert str(error) == "denied by policy: it mentions the forbidden word (decided by the policy)"
    assert not effects.exists()


def test_deeply_nested_arguments_get_an_answer(tmp_path: Path) -> None:
    """Sent as raw JSON-RPC over stdio (the SDK's client will not even serialise 900 levels; a hostile one does)."""
    effects = tmp_path / "effects.txt"
    (tmp_path / "groundstate.toml").write_text(effects_config(tmp_path, CONTAINS))
    deep = "[" * 900 + '"bottom"' + "]" * 900
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    lines = [json.dumps(m) for m in messages]
    lines.append('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "lying__append", '
                 f'"arguments": {{"path": {json.dumps(str(effects))}, "note": {deep}}}}}}}')
    lines.append(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))  # and the session goes on
    for number, hostile in ((4, '"\\ud800"'), (5, "7" * 5000)):  # a lone surrogate, a number of 5,000 digits
        lines.append(f'{{"jsonrpc": "2.0", "id": {number}, "method": "tools/call", "params": {{"name": '
                     f'"lying__append", "arguments": {{"path": {json.dumps(str(effects))}, "note": {hostile}}}}}}}')
    guard = subprocess.Popen([sys.executable, "-m", "groundstate", "mcp", "serve"], cwd=tmp_path,
                             env={**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"),
                                  "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    try:
        assert guard.stdin is not None and guard.stdout is not None
        guard.stdin.write("\n".join(lines) + "\n")
        guard.stdin.flush()
        answers: dict[int, Any] = {}

        def read(out: Any) -> None:
            for line in out:
                message = json.loads(line)
                if "id" in message:
                    answers[message["id"]] = message
                if len(answers) == 5:
                    return

        reader = threading.Thread(target=read, args=(guard.stdout,), daemon=True)
        reader.start()
        reader.join(60)
        assert len(answers) == 5, f"no answer within 60 s (answered: {sorted(answers)})"  # the hang this test pins
        assert 2 in answers, "no answer to the deeply nested call"
        answer = answers[2]
        text = json.dumps(answer)
        assert "error" in answer or answer["result"].get("isError"), text
        assert "Traceback" not in text and "RecursionError" not in text
        assert answers[3]["result"]["tools"]  # the guard still serves
        for number in (4, 5):
            assert "cannot be read whole" in json.dumps(answers[number]), answers[number]
    finally:
        guard.kill()
        _, stderr = guard.communicate(timeout=30)
    assert "Traceback" not in stderr
    assert not effects.exists()


def test_a_string_where_a_rule_compares_numbers_is_a_clean_denial(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    rules = 'mcp_denied(C, "too many") :- mcp_argument(C, "count", N), N > 10.\n'
    error = refused(tmp_path, rules, {"path": str(effects), "count": "11"})
    message = str(error)
    assert message.startswith("denied by policy: the policy could not be evaluated on this call's arguments")
    assert "mine.mg:1" in message and str(tmp_path) not in message  # the rule named, the operator's path not
    assert error.data["decision"] == "deny" and "Traceback" not in message
    assert not effects.exists()


def test_a_reason_built_from_hostile_text_stays_a_value(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    rules = ('mcp_denied(C, R) :- mcp_argument(C, "note", V), :string:contains(V, "forbidden"), '
             'R = fn:string:concat("refused: ", V).\n')  # fmt: skip
    hostile = 'forbidden"\n). evil(X) :- mcp_call(X, _, _, _, _).\n\\ :- .'
    error = refused(tmp_path, rules, {"path": str(effects), "note": hostile})
    assert str(error) == f"denied by policy: refused: {hostile} (decided by the policy)"
    why = error.data["why"]
    assert "[derived by the rule at" in why and "[asserted]" in why  # the derivation found the fact: text as data
    assert not effects.exists()


def test_nan_and_infinity_are_refused_not_forwarded_as_null(tmp_path: Path) -> None:
    """JSON has no NaN or infinity: a client that sends ``1e400`` or ``NaN`` (Python's reader accepts them) would have
    a rule judge a float while the upstream got ``null``. Refused with the reason; the guard stays up, no traceback."""
    (tmp_path / "groundstate.toml").write_text(effects_config(tmp_path, 'mcp_denied(C, "no null mode") :- '
                                                                       'mcp_argument(C, "mode", /null).\n'))
    guard = subprocess.Popen([sys.executable, "-m", "groundstate", "mcp", "serve"], cwd=tmp_path, text=True,
                             env={**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"),
                                  "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml")},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    effects = str(tmp_path / "effects.txt")
    calls = [f'{{"jsonrpc": "2.0", "id": {n}, "method": "tools/call", "params": {{"name": "lying__append", '
             f'"arguments": {{"path": "{effects}", "mode": {mode}}}}}}}' for n, mode in
             ((2, "1e400"), (3, "-Infinity"), (4, "NaN"), (5, "null"))]  # fmt: skip
    hello = ('{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", '
             '"capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}\n'
             '{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')  # fmt: skip
    assert guard.stdin is not None and guard.stdout is not None
    guard.stdin.write(hello + "\n".join(calls) + "\n")
    guard.stdin.flush()
    answers: dict[int, Any] = {}
    for line in guard.stdout:  # every call answered before the client goes away
        message = json.loads(line)
        answers[message.get("id", 0)] = message
        if all(number in answers for number in (2, 3, 4, 5)):
            break
    _, err = guard.communicate(timeout=60)
    for number, shown in ((2, "inf"), (3, "-inf"), (4, "nan")):
        result = answers[number]["result"]
        assert result["isError"] is True, answers[number]
        assert f"the argument 'mode' is {shown}, which JSON cannot carry" in result["content"][0]["text"]
    assert "denied by policy: no null mode" in answers[5]["result"]["content"][0]["text"]
    assert not (tmp_path / "effects.txt").exists() and "Traceback" not in err
