"""A real console (``groundstate serve`` in a subprocess) and a real browser (Debian's chromium, headless)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from ..runtime.conftest import Script, envelope, model  # noqa: F401 - the scripted provider fixture

ARTIFACTS = Path(__file__).parents[2] / "test-artifacts" / "console"
CHROMIUM = "/usr/bin/chromium"


@dataclass
class Console:
    url: str
    token: str
    home: Path
    output: str = ""  # what the server printed, once it has stopped
    starter_token: str = ""
    process: subprocess.Popen[str] | None = None  # the server (for tests that stop it themselves)

    def starter(self) -> httpx.Client:
        """A client of a second account (the operator ``sam``, created on first use) that starts runs: the account
        deciding their pauses (the first admin, in the browser) must be another one (access.mg)."""
        if not self.starter_token:
            self.starter_token = self.account("sam", "operator")
        return self.api(self.starter_token)

    def api(self, token: str | None = None) -> httpx.Client:
        """A client authenticated as the first admin (or as the account whose ``token`` is given)."""
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token or self.token}"}, timeout=30)

    def account(self, name: str, role: str) -> str:
        """Create an operator account through the API (as the first admin); its token."""
        with self.api() as admin:
            created = admin.post("/api/operators", json={"name": name, "role": role})
        assert created.status_code == 201, created.text
        token: str = created.json()["token"]
        return token


@contextlib.contextmanager
def serving(tmp_path: Path, *options: str) -> Iterator[Console]:
    """``groundstate serve`` in a subprocess (``options`` added to its command line), until the block ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path / "home"
    env = {**os.environ, "GROUNDSTATE_HOME": str(home)}
    env.pop("GROUNDSTATE_CONFIG", None)
    server = subprocess.Popen([sys.executable, "-m", "groundstate", "serve", "--port", str(port), *options], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/login", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    else:
        server.kill()
        pytest.fail(f"the console did not start: {server.stdout.read() if server.stdout else ''}")
    token = (home / "console.token").read_text().strip()
    console = Console(url, token, home, process=server)
    try:
        yield console
    finally:
        server.terminate()
        console.output = server.communicate(timeout=10)[0]


@pytest.fixture
def console(tmp_path: Path, model: tuple[str, Script]) -> Iterator[Console]:  # noqa: F811 - uses the fixture
    """The console, configured to let runs use the scripted model (``[models] endpoints``): a run an account starts
    over HTTP may use only model endpoints the configuration names."""
    (tmp_path / "console.toml").write_text(f'[models]\nendpoints = ["{model[0]}"]\n')
    with serving(tmp_path, "--config", "console.toml") as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Per module: Playwright's sync API keeps an event loop running in this thread until it is closed, and the
    other test modules call asyncio.run()."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is needed for the browser tests (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox",
                                                                             "--disable-gpu"])  # fmt: skip
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, console: Console) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{console.url}/")
    shot(page, "login")
    page.fill("input[name=token]", console.token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{console.url}/")
    yield page
    context.close()


def sign_in(page: Page, console: Console, name: str, role: str) -> None:
    """Sign the browser in as a new account ``name`` with ``role`` (through the login form)."""
    token = console.account(name, role)
    page.goto(f"{console.url}/login")
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{console.url}/")
    expect(page.locator("#who")).to_have_text(f"{name} ({role})")


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
