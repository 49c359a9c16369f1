"""The MCP approval card in a real browser: a call the guard holds appears with its server, tool, arguments and
derivation; Approve lets exactly that call through."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from playwright.sync_api import Page, expect

from ..guard.test_mcp_guard import guarded
from .conftest import Console, shot, sign_in


def test_the_card_shows_the_call_and_approve_lets_it_through(page: Page, console: Console, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a")
    config = (f'[mcp]\napproval_timeout_sec = 60\n[mcp.servers.git]\ncommand = ["{sys.executable}", "-m", '
              f'"mcp_server_git", "--repository", "{repo}"]\n')  # fmt: skip
    results: list[Any] = []

    async def use(client: ClientSession) -> str:
        added = await client.call_tool("git__git_add", {"repo_path": str(repo), "files": ["a.txt"]})
        return added.content[0].text  # type: ignore[union-attr]

    sign_in(page, console, "dana", "operator")
    caller = threading.Thread(target=lambda: results.append(guarded(tmp_path, config, use)), daemon=True)
    caller.start()
    card = page.locator(".mcp-call")
    for _ in range(60):
        page.goto(f"{console.url}/calls")
        if card.count():
            break
        page.wait_for_timeout(500)
    expect(card).to_have_count(1)
    expect(card.locator("h2")).to_contain_text("git/git_add")
    expect(card.locator(".arguments")).to_contain_text('"a.txt"')
    call = page.locator(".mcp-call").get_attribute("data-call")
    expect(card.locator(".why")).to_contain_text(f'mcp_call("{call}", "git", "git_add"')
    shot(page, "mcp-approval")
    page.click(".mcp-call button.execute")
    expect(page.locator(".mcp-call")).to_have_count(0)
    expect(page.locator("table.calls tbody tr").first).to_contain_text("dana")
    caller.join(60)
    assert results and not caller.is_alive()
    staged = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--name-only"], capture_output=True, text=True)
    assert staged.stdout.split() == ["a.txt"]
