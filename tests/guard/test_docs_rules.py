"""Every rule example in docs/mcp.md decides what it claims: each ```mangle block ends with lines
``# SERVER/TOOL {arguments} => decision``, decided here with the block as the user's rule file against the tool lists
of the real ``mcp-server-time`` and ``mcp-server-git`` (``/srv/repo``: a git repository on ``main``); and the
``logic check --policy mcp`` output the page shows is what the command prints for its example."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from groundstate.guard import McpPolicy

from ..test_docs import blocks

CLAIM = re.compile(r"^# (\w+)/(\w+) (\{.*\}) => (permit|approve|deny)$")
EXAMPLES = [code for lang, code in blocks("mcp.md") if lang == "mangle"]


def listed(*command: str) -> list[Any]:
    """The tools a real server lists."""

    async def tools() -> list[Any]:
        params = StdioServerParameters(command=sys.executable, args=list(command))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            return list((await client.list_tools()).tools)

    return asyncio.run(asyncio.wait_for(tools(), 60))


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("srv") / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    return repo


@pytest.fixture(scope="module")
def servers(repository: Path) -> dict[str, list[Any]]:
    return {"time": listed("-m", "mcp_server_time", "--local-timezone", "UTC"),
            "git": listed("-m", "mcp_server_git", "--repository", str(repository))}  # fmt: skip


def test_every_rule_example_claims_its_decisions() -> None:
    assert len(EXAMPLES) >= 4
    for example in EXAMPLES:
        assert [line for line in example.splitlines() if CLAIM.match(line)], f"no claimed decision in:\n{example}"


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"example-{n}" for n in range(len(EXAMPLES))])
def test_the_example_decides_what_it_claims(
    example: str, repository: Path, servers: dict[str, list[Any]], tmp_path: Path
) -> None:
    text = example.replace("/srv/repo", str(repository))
    (tmp_path / "mine.mg").write_text(text)
    policy = McpPolicy([tmp_path / "mine.mg"])
    for server, tools in servers.items():
        policy.add_tools(server, tools)
    claims = [CLAIM.match(line) for line in text.splitlines()]
    for claim in filter(None, claims):
        server, tool, arguments, claimed = claim.groups()
        verdict = policy.decide(server, tool, json.loads(arguments), client="docs")
        assert verdict.decision == claimed, f"{server}/{tool} {arguments}: {verdict.decision} {verdict.reasons}"


def test_logic_check_prints_what_the_page_shows(tmp_path: Path) -> None:
    [notes] = [example for example in EXAMPLES if "outside_notes" in example]
    [shown] = [code for lang, code in blocks("mcp.md") if lang == "text" and "--policy mcp" not in code
               and "with the shipped mcp policy" in code]  # fmt: skip
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "mcp.mg").write_text(notes)
    done = subprocess.run([sys.executable, "-m", "groundstate", "logic", "check", "--policy", "mcp", "rules/mcp.mg"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).strip() == shown.strip()


def test_logic_check_without_the_policy_names_the_option_that_loads_it(tmp_path: Path) -> None:
    (tmp_path / "mine.mg").write_text(EXAMPLES[0])
    done = subprocess.run([sys.executable, "-m", "groundstate", "logic", "check", "mine.mg"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().endswith("hint: mcp_argument is declared by the shipped mcp policy: check your rules "
                                        "with it (--policy mcp)")  # fmt: skip
