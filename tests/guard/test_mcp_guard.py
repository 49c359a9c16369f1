"""`groundstate mcp serve` in front of real MCP servers from PyPI (mcp-server-time, mcp-server-git on a repository
the test creates), driven by the official `mcp` SDK's client over stdio: tools listed per server, read-only calls
forwarded, a user rule's denial an MCP error with the reasons and the derivation, a writing call held for an operator
and denied when nobody approves in time — and the repository untouched."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from groundstate.config import ConfigFileError, default_db_url, load_config, load_or_create_token
from groundstate.guard import ApprovalRefused, Approvals, Ledger, McpPolicy, call_digest
from groundstate.store import Operators

from ..test_docs import blocks

Session = Callable[[ClientSession], Awaitable[Any]]


class Refusal:
    """A call the guard refused, as the model reads it: an error result, its text, and the structured decision."""

    def __init__(self, result: Any) -> None:
        assert result.is_error, f"the call was not refused: {result}"
        self.text: str = result.content[0].text
        self.data: dict[str, Any] = (result.meta or {})["groundstate/decision"]

    def __str__(self) -> str:
        return self.text


async def refusal(client: ClientSession, tool: str, arguments: dict[str, Any], **options: Any) -> Refusal:
    """Call ``tool`` and return the guard's refusal (the call must be refused, with a result the model reads)."""
    return Refusal(await client.call_tool(tool, arguments, **options))


def _search_path() -> dict[str, str]:
    """The test's own PYTHONPATH, when it has one (a checkout tested without installing it), for the guard too."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}


def guarded(tmp_path: Path, config: str, use: Session, stderr: bool = False, env: dict[str, str] | None = None,
            shell: bool = False, wrapper: list[str] | None = None, options: tuple[str, ...] = ()) -> Any:  # fmt: skip
    """Run ``use`` with an SDK client session on the guard (started with ``config`` as groundstate.toml and ``env``
    added to its environment); with ``stderr``, (what ``use`` returned, what the guard wrote on its stderr); with
    ``shell``, the guard started by a shell that waits for it (another client process than this one); ``wrapper``:
    a command the guard's command line is given to (``unshare …``); ``options``: ``mcp serve``'s own."""
    (tmp_path / "groundstate.toml").write_text(config)
    command, arguments = sys.executable, ["-m", "groundstate", "mcp", "serve", *options]
    if shell:
        line = " ".join(["-m", "groundstate", "mcp", "serve", *options])
        command, arguments = "/bin/sh", ["-c", f'"{sys.executable}" {line}; exit $?']
    if wrapper:
        command, arguments = wrapper[0], [*wrapper[1:], command, *arguments]
    params = StdioServerParameters(command=command, args=arguments,
                                   cwd=str(tmp_path), env={"GROUNDSTATE_HOME": str(tmp_path / "home"),
                                                           "GROUNDSTATE_CONFIG": str(tmp_path / "groundstate.toml"),
                                                           **_search_path(), **(env or {})})  # fmt: skip

    errors = tmp_path / "guard.stderr"

    async def session() -> Any:
        with errors.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                return await use(client)

    used = asyncio.run(asyncio.wait_for(session(), 120))
    return (used, errors.read_text()) if stderr else used


def kill_the_guard_mid_call(pids: Path) -> None:
    """Once ``effect_server.py`` wrote its ``.pids`` (it has the call: the guard is forwarding it), SIGKILL the guard
    itself — found from the upstream up its ancestors, since the upstream's parent may be its keeper — then the
    upstream the dead guard left behind."""
    for _ in range(600):
        if pids.exists() and pids.read_text():
            server = guard = int(pids.read_text().split()[1])
            while b"mcp\x00serve" not in Path(f"/proc/{guard}/cmdline").read_bytes():
                guard = int(Path(f"/proc/{guard}/stat").read_text().rsplit(")", 1)[1].split()[1])
            os.kill(guard, signal.SIGKILL)
            time.sleep(0.5)
            with contextlib.suppress(ProcessLookupError):
                os.kill(server, signal.SIGKILL)
            return
        time.sleep(0.05)


TIME = f'[mcp.servers.time]\ncommand = ["{sys.executable}", "-m", "mcp_server_time", "--local-timezone", "UTC"]\n'


def test_tools_are_listed_per_server_and_read_only_calls_pass(tmp_path: Path) -> None:
    async def use(client: ClientSession) -> tuple[list[str], str]:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("time__get_current_time", {"timezone": "Europe/Paris"})
        return tools, result.content[0].text  # type: ignore[union-attr]

    tools, text = guarded(tmp_path, TIME, use)
    assert tools == ["time__get_current_time", "time__convert_time"]
    assert '"timezone": "Europe/Paris"' in text
    [entry] = Ledger(default_db_url(tmp_path / "home")).entries()
    assert (entry.client, entry.status) == ("mcp over stdio", "permit")  # the name the client gave, and the transport


def test_a_user_rule_denies_with_reasons_and_derivation(tmp_path: Path) -> None:
    (tmp_path / "mine.mg").write_text('mcp_denied(C, "no questions about Pyongyang") :- '
                                      'mcp_argument(C, "timezone", "Asia/Pyongyang").\n')  # fmt: skip

    async def use(client: ClientSession) -> tuple[Refusal, str]:
        refused = await refusal(client, "time__get_current_time", {"timezone": "Asia/Pyongyang"})
        allowed = await client.call_tool("time__get_current_time", {"timezone": "Asia/Tokyo"})
        return refused, allowed.content[0].text  # type: ignore[union-attr]

    error, allowed = guarded(tmp_path, TIME + '[mcp]\npolicy = ["mine.mg"]\n', use)
    assert str(error) == "denied by policy: no questions about Pyongyang (decided by the policy)"
    data = error.data
    assert data["decision"] == "deny" and data["by"] == "the policy" and data["digest"].startswith("sha256:")
    assert f'mcp_argument("{data["call"]}", "timezone", "Asia/Pyongyang")' in data["why"]  # down to the fact
    assert "[derived by the rule at mine.mg:1]" in data["why"]  # by the file's name: no path goes to the client
    assert str(tmp_path) not in data["why"] and "/groundstate/" not in data["why"] and "site-packages" not in str(data)
    assert "Asia/Tokyo" in allowed  # the rule denies exactly what it says


def test_a_writing_call_waits_for_an_operator_and_is_denied_in_time(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a")
    config = (f'[mcp]\napproval_timeout_sec = 1\n[mcp.servers.git]\ncommand = ["{sys.executable}", "-m", '
              f'"mcp_server_git", "--repository", "{repo}"]\n')  # fmt: skip

    async def use(client: ClientSession) -> tuple[str, Refusal, Refusal]:
        status = await client.call_tool("git__git_status", {"repo_path": str(repo)})
        add = await refusal(client, "git__git_add", {"repo_path": str(repo), "files": ["a.txt"]})
        reset = await refusal(client, "git__git_reset", {"repo_path": str(repo)})
        return status.content[0].text, add, reset  # type: ignore[union-attr]

    status, add, reset = guarded(tmp_path, config, use)
    assert "a.txt" in status  # read-only: forwarded
    assert str(add) == ("denied: no operator approved the call within 1 s: git/git_add changes things (it is not "
                        "read-only): an operator approves it first (decided by the timeout)")  # fmt: skip
    assert add.data["decision"] == "deny" and add.data["policy_decision"] == "approve"
    assert "git/git_reset may destroy data" in str(reset)
    staged = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--name-only"], capture_output=True, text=True)
    assert staged.stdout == ""  # nothing reached the repository


def test_the_configuration_names_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text('[mcp.servers.both]\ncommand = ["x"]\nurl = "http://x"\n')
    with pytest.raises(ConfigFileError, match=r"g\.toml:1: mcp\.servers\.both: Value error, give either command"):
        load_config(tmp_path / "g.toml")
    (tmp_path / "g.toml").write_text('[mcp.servers."bad name"]\ncommand = ["x"]\n')
    with pytest.raises(ConfigFileError, match="'bad name' is not an identifier"):
        load_config(tmp_path / "g.toml")
    (tmp_path / "g.toml").write_text("[mcp]\n")
    done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve", "--config", "g.toml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "names no [mcp.servers.NAME]" in done.stderr and done.stdout == ""


def test_a_held_call_is_decided_once_for_its_exact_digest(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    verdict = McpPolicy().decide("git", "git_add", {"files": ["a"]}, "test")
    held = ledger.record("git", "git_add", {"files": ["a"]}, "test", verdict, hold_seconds=30)
    changed = call_digest("git", "git_add", {"files": ["b"]})
    with pytest.raises(ApprovalRefused, match="a changed call needs its own approval"):
        ledger.decide(held, True, "dana", changed)
    assert ledger.decide(held, True, "dana", verdict.digest).status == "approved"
    with pytest.raises(ApprovalRefused, match="is approved: only a held call can be decided"):
        ledger.decide(held, False, "eve")  # once
    late = ledger.record("git", "git_add", {"files": ["a"]}, "test", verdict, hold_seconds=0.01)
    time.sleep(0.05)
    with pytest.raises(ApprovalRefused, match="expired"):
        ledger.decide(late, True, "dana")
    assert asyncio.run(Approvals(ledger, timeout=0.2, poll=0.05).wait(late)) == "expired"


def test_the_approvals_command_decides_a_held_call_by_its_digest(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'c.db'}"
    verdict = McpPolicy().decide("git", "git_add", {"files": ["a"]}, "test")
    held = Ledger(database).record("git", "git_add", {"files": ["a"]}, "test", verdict, hold_seconds=60)

    home = tmp_path / "home"
    home.mkdir()
    admin_token = load_or_create_token(home)[0]
    operators = Operators(database, first_admin_token=admin_token)
    admin = operators.authenticate(admin_token)
    assert admin is not None
    _, eve = operators.add("eve", "operator", by=admin)

    def approvals(*args: str, token: str = eve) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GROUNDSTATE_HOME": str(home), "GROUNDSTATE_TOKEN": token}
        return subprocess.run([sys.executable, "-m", "groundstate", "approvals", *args, "--db", database],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)  # fmt: skip

    listed = approvals("list")
    assert f'"id": {held}' in listed.stdout and '"status": "held"' in listed.stdout
    wrong = approvals("approve", str(held), "--digest", call_digest("git", "git_add", {"files": ["b"]}))
    assert wrong.returncode == 4 and "a changed call needs its own approval" in wrong.stderr
    unknown = approvals("deny", str(held), token="gso_not-a-token")
    assert unknown.returncode == 2 and "belongs to no operator account" in unknown.stderr
    denied = approvals("deny", str(held), "--digest", verdict.digest)
    assert denied.returncode == 0 and denied.stdout.strip().endswith(": denied by eve")
    assert approvals("list").stdout == ""  # nothing held any more


def test_the_docs_client_configurations_start_the_guard(tmp_path: Path) -> None:
    """Each JSON client configuration docs/mcp.md shows (Claude Desktop, Cursor) starts a working guard as written,
    its configuration path pointed at this test's."""
    snippets = [json.loads(code) for lang, code in blocks("mcp.md") if lang == "json"]
    assert len(snippets) == 2
    (tmp_path / "groundstate.toml").write_text(TIME)
    for snippet in snippets:
        entry = snippet["mcpServers"]["groundstate"]
        args = [str(tmp_path / "groundstate.toml") if a.endswith("groundstate.toml") else a for a in entry["args"]]
        command = str(Path(sys.executable).parent / entry["command"])  # the installed console script
        params = StdioServerParameters(command=command, args=args, env={"GROUNDSTATE_HOME": str(tmp_path / "h")})

        async def session(params: StdioServerParameters = params) -> str:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                result = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
                return result.content[0].text  # type: ignore[union-attr]

        assert '"timezone": "UTC"' in asyncio.run(asyncio.wait_for(session(), 60))


def test_a_ledger_from_an_earlier_version_keeps_its_decisions(tmp_path: Path) -> None:
    """Upgrading: a ledger table without the columns added since gets them, and its rows stay readable."""
    database = tmp_path / "old.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE mcp_decisions (id INTEGER PRIMARY KEY AUTOINCREMENT, at DATETIME NOT NULL, "
                   "server VARCHAR(200) NOT NULL, tool VARCHAR(200) NOT NULL, arguments TEXT NOT NULL, "
                   "digest VARCHAR(80) NOT NULL, client VARCHAR(200) NOT NULL, decision VARCHAR(16) NOT NULL, "
                   "reasons TEXT NOT NULL, why TEXT NOT NULL, status VARCHAR(16) NOT NULL, expires_at DATETIME, "
                   "operator VARCHAR(200), decided_at DATETIME)")  # fmt: skip
        db.execute("INSERT INTO mcp_decisions (at, server, tool, arguments, digest, client, decision, reasons, why, "
                   "status) VALUES ('2026-11-01 10:00:00', 'git', 'git_add', '{}', 'sha256:x', 'stdio', 'permit', "
                   """'["old"]', '', 'permit')""")  # fmt: skip
    ledger = Ledger(f"sqlite:///{database}")
    verdict = McpPolicy().decide("git", "git_add", {"files": ["a"]}, "test")
    ledger.record("git", "git_add", {"files": ["a"]}, "test", verdict, hold_seconds=30)
    assert [(e.call, e.reasons) for e in ledger.entries()] == [(verdict.call, verdict.reasons), (None, ["old"])]


TOOLS_MODULE = '''
import groundstate


@groundstate.tool(read_only=True)
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@groundstate.tool
def note(text: str) -> str:
    """Keep a note in the workspace."""
    with open("notes.txt", "a") as file:
        file.write(text + "\\n")
    return "noted"
'''


def test_the_guard_serves_your_python_tools_under_the_same_policy(tmp_path: Path) -> None:
    (tmp_path / "guard_tools.py").write_text(TOOLS_MODULE)
    config = '[tools]\nmodules = ["guard_tools"]\n[mcp]\napproval_timeout_sec = 1\n'

    async def use(client: ClientSession) -> tuple[list[Any], str, str, str]:
        tools = (await client.list_tools()).tools
        shouted = await client.call_tool("python__shout", {"text": "quiet"})
        wrong = await client.call_tool("python__shout", {"text": 3})
        held = await refusal(client, "python__note", {"text": "hello"})
        return (tools, shouted.content[0].text, wrong.content[0].text,  # type: ignore[union-attr]
                str(held))  # fmt: skip

    tools, shouted, wrong, held = guarded(tmp_path, config, use)
    assert [(t.name, t.annotations.read_only_hint) for t in tools] == [("python__shout", True), ("python__note", False)]
    assert tools[0].input_schema == {"properties": {"text": {"type": "string"}}, "required": ["text"],
                                     "type": "object", "additionalProperties": False}  # fmt: skip
    assert shouted == "QUIET"  # read-only: permitted, run in the sandbox
    assert "text: Input should be a valid string" in wrong  # refused before the function ran
    assert "python/note may destroy data" in held  # not read-only: held, and nobody approved in time
    assert not (tmp_path / "home" / "mcp-workspace" / "notes.txt").exists()


def test_an_upstream_that_does_not_start_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "groundstate.toml").write_text(f'[mcp.servers.broken]\ncommand = ["{sys.executable}", "-c", '
                                               '"raise SystemExit(3)"]\n')  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "groundstate", "mcp", "serve", "--config", "groundstate.toml"],
                          cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                          env={**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")})  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "error: mcp.servers.broken: cannot start or reach the server" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""  # stdout is the protocol's: nothing else goes there


def test_each_decision_names_the_digest_of_the_policy_that_made_it(tmp_path: Path) -> None:
    """The refusal the client reads and the ledger row name the policy by content: another rule, another digest;
    the same rules anywhere (whatever their install path), the same digest."""
    rule = 'mcp_denied(C, "no Pyongyang") :- mcp_argument(C, "timezone", "Asia/Pyongyang").\n'
    (tmp_path / "mine.mg").write_text(rule)

    async def use(client: ClientSession) -> Refusal:
        return await refusal(client, "time__get_current_time", {"timezone": "Asia/Pyongyang"})

    refused = guarded(tmp_path, TIME + '[mcp]\npolicy = ["mine.mg"]\n', use)
    expected = McpPolicy([tmp_path / "mine.mg"]).digest
    assert refused.data["policy"] == expected and expected.startswith("sha256:")
    [entry] = Ledger(default_db_url(tmp_path / "home")).entries()
    assert entry.policy == expected and entry.to_json()["policy"] == expected
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "mine.mg").write_text(rule)
    assert McpPolicy([tmp_path / "other" / "mine.mg"]).digest == expected  # by content, not by path
    (tmp_path / "mine.mg").write_text(rule + 'mcp_denied(C, "no") :- mcp_argument(C, "timezone", "Asia/Tokyo").\n')
    assert McpPolicy([tmp_path / "mine.mg"]).digest != expected
