"""Every page and API call needs the token; cookie sessions need the CSRF token to change anything."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from ..loopback import Reply, loopback
from ..runtime.conftest import Script, envelope
from .conftest import Console, serving


def test_requests_without_the_token_are_refused(console: Console) -> None:
    anonymous = httpx.Client(base_url=console.url, timeout=10)
    for path in ("/api/runs", "/api/runs/x/events", "/api/workflows", "/api/runs/x/why"):
        response = anonymous.get(path)
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert anonymous.post("/api/runs", json={"example": "market-brief"}).status_code == 401
    wrong = httpx.Client(base_url=console.url, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert wrong.get("/api/runs").status_code == 401
    page = anonymous.get("/", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/"
    assert anonymous.get("/runs/x/kernel", follow_redirects=False).headers["location"].startswith("/login")
    assert anonymous.post("/login", data={"token": "nope", "next": "/"}).status_code == 401
    assert anonymous.get("/login", params={"token": "nope"}).status_code == 401
    assert console.api().get("/api/runs").json() == []


def test_token_file_is_private(console: Console) -> None:
    mode = stat.S_IMODE(os.stat(console.home / "console.token").st_mode)
    assert mode == 0o600


def test_cookie_sessions_need_the_csrf_token(console: Console) -> None:
    browser = httpx.Client(base_url=console.url, timeout=10)
    login = browser.post("/login", data={"token": console.token, "next": "/"}, follow_redirects=False)
    assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
    assert "samesite=strict" in login.headers["set-cookie"].lower()
    assert browser.get("/").status_code == 200  # the session works for reading
    forged = browser.post("/runs", data={"example": "market-brief", "model": "local"}, follow_redirects=False)
    assert forged.status_code == 403 and forged.json()["detail"] == "missing or wrong CSRF token"
    assert browser.post("/api/runs", json={"example": "market-brief"}).status_code == 403
    assert console.api().get("/api/runs").json() == []  # nothing was started
    assert browser.get("/login", params={"next": "//evil.example/"}, follow_redirects=False).status_code == 200
    redirect = browser.get("/login", params={"token": console.token, "next": "//evil.example/"},
                           headers={"sec-fetch-site": "none"}, follow_redirects=False)  # fmt: skip
    assert redirect.headers["location"] == "/"  # no open redirect


def test_no_page_can_be_framed_and_only_the_consoles_script_runs(console: Console) -> None:
    """A hostile page on another port of 127.0.0.1 must not frame the console (a click on a framed Abort button
    would be an operator's decision): every response, refusals and redirects included, forbids framing."""
    anonymous = httpx.Client(base_url=console.url, timeout=10)
    responses = [console.api().get("/api/runs"), anonymous.get("/", follow_redirects=False),
                 anonymous.get("/login"), anonymous.get("/api/runs")]  # fmt: skip
    for response in responses:
        assert response.headers["x-frame-options"] == "DENY"
        policy = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy


def test_state_files_are_private(console: Console) -> None:
    assert stat.S_IMODE(os.stat(console.home).st_mode) == 0o700
    database = console.home / "groundstate.db"
    assert database.exists() and stat.S_IMODE(os.stat(database).st_mode) == 0o600


CROSS_SITE_SENDERS = {  # how a browser marks a request another site's page made it send
    "another site": {"sec-fetch-site": "cross-site", "origin": "https://evil.example"},
    "another port of 127.0.0.1": {"sec-fetch-site": "same-site", "origin": "http://127.0.0.1:9"},
    "an older browser, Origin only": {"origin": "https://evil.example"},
    "a sandboxed page": {"origin": "null"},
    "a link without Origin": {"referer": "https://evil.example/page.html"},
}


def _session_of(client: httpx.Client, console: Console) -> str | None:
    """Who the client's browser session is, as the console's header says (None: not logged in)."""
    page = client.get("/", follow_redirects=False)
    if page.status_code != 200:
        return None
    found = re.search(r'id="who">([^<]*)<', page.text)
    return found.group(1) if found else None


def test_a_cross_site_login_form_or_link_does_not_log_the_browser_in(console: Console) -> None:
    """Issue 31 (login CSRF): a page the operator visits submits ``/login`` with the token of an account its author
    holds, or navigates to ``/login?token=…``; the operator's browser was logged into that account and their next
    decisions recorded under it. Every cross-site sender is refused with a 403 that says why, and no session cookie is
    set or replaced: the operator stays who they were."""
    mallory = console.account("mallory", "operator")
    for sender, headers in CROSS_SITE_SENDERS.items():
        operator = httpx.Client(base_url=console.url, timeout=10)
        operator.post("/login", data={"token": console.token}, headers={"origin": console.url})
        assert _session_of(operator, console) == "admin (admin)"
        posted = operator.post("/login", data={"token": mallory, "next": "/"}, headers=headers, follow_redirects=False)
        followed = operator.get("/login", params={"token": mallory, "next": "/"}, follow_redirects=False,
                                headers={k: v for k, v in headers.items() if k != "origin"} or headers)  # fmt: skip
        for response in (posted, followed):
            assert response.status_code == 403, (sender, response.status_code)
            assert "set-cookie" not in response.headers, sender
            assert "login refused:" in response.text, sender
        assert _session_of(operator, console) == "admin (admin)", sender  # not mallory
        fresh = httpx.Client(base_url=console.url, timeout=10)  # a browser with no session: none is created either
        refused = fresh.post("/login", data={"token": mallory}, headers=headers, follow_redirects=False)
        assert refused.status_code == 403 and "set-cookie" not in refused.headers, sender


def test_same_origin_logins_and_the_link_the_operator_opens_still_work(console: Console) -> None:
    """The documented flows: the login form (a same-origin POST), and the link ``demo`` prints opened from the
    terminal (``Sec-Fetch-Site: none``) log in at once; a client that sends no browser metadata (curl) posts the form
    as before."""
    form = httpx.Client(base_url=console.url, timeout=10)
    posted = form.post("/login", data={"token": console.token, "next": "/runs"}, follow_redirects=False,
                       headers={"sec-fetch-site": "same-origin", "origin": console.url})  # fmt: skip
    assert posted.status_code == 303 and posted.headers["location"] == "/runs" and "set-cookie" in posted.headers
    assert _session_of(form, console) == "admin (admin)"
    link = httpx.Client(base_url=console.url, timeout=10)
    opened = link.get("/login", params={"token": console.token, "next": "/runs/x"}, follow_redirects=False,
                      headers={"sec-fetch-site": "none", "sec-fetch-mode": "navigate"})  # fmt: skip
    assert opened.status_code == 303 and opened.headers["location"] == "/runs/x" and "set-cookie" in opened.headers
    curl = httpx.Client(base_url=console.url, timeout=10)
    assert curl.post("/login", data={"token": console.token}, follow_redirects=False).status_code == 303


def test_a_login_link_never_replaces_a_session_or_logs_in_unasked_without_a_confirmation(console: Console) -> None:
    """A link to ``/login?token=`` for another account, even one the operator opened themselves (a link in a chat
    message opens with ``Sec-Fetch-Site: none``), does not replace their session: the console asks, naming both
    accounts, and sets no cookie; so does a link opened without the browser saying by whom. Confirming (a
    same-origin POST of the page's form) logs in."""
    mallory = console.account("mallory", "operator")
    operator = httpx.Client(base_url=console.url, timeout=10)
    operator.post("/login", data={"token": console.token}, headers={"origin": console.url})
    asked = operator.get("/login", params={"token": mallory, "next": "/"}, headers={"sec-fetch-site": "none"},
                         follow_redirects=False)  # fmt: skip
    assert asked.status_code == 200 and "set-cookie" not in asked.headers
    assert "Log in as mallory?" in asked.text and "You are signed in as <strong>admin</strong>" in asked.text
    assert asked.headers["cache-control"] == "no-store"
    assert _session_of(operator, console) == "admin (admin)"
    unlabelled = httpx.Client(base_url=console.url, timeout=10).get("/login", params={"token": mallory},
                                                                    follow_redirects=False)  # fmt: skip
    assert unlabelled.status_code == 200 and "set-cookie" not in unlabelled.headers
    confirmed = operator.post("/login", data={"token": mallory, "next": "/"}, follow_redirects=False,
                              headers={"sec-fetch-site": "same-origin", "origin": console.url})  # fmt: skip
    assert confirmed.status_code == 303 and _session_of(operator, console) == "mallory (operator)"


def test_a_hostile_page_in_the_operators_browser_cannot_log_it_into_another_account(
    page: Page, console: Console
) -> None:
    """The attack as a browser lives it (Chromium): the operator, signed in as admin, opens a page on another port of
    127.0.0.1 — the same site to the browser — that auto-submits a login form with mallory's token, then one that
    navigates to ``/login?token=`` with it. Both are refused; the operator is still admin."""
    mallory = console.account("mallory", "operator")
    hostile = {
        "/form": f'<form id="f" method="post" action="{console.url}/login"><input name="token" value="{mallory}">'
                 '<input name="next" value="/"></form><script>document.getElementById("f").submit()</script>',
        "/link": f'<script>location.href = "{console.url}/login?token={mallory}&next=/"</script>',
    }  # fmt: skip
    html = {"content-type": "text/html"}
    with loopback(lambda path, _headers, _body: Reply(200, html, hostile[path].encode())) as attacker:
        for path in hostile:
            page.goto(f"{attacker}{path}")
            page.wait_for_url(f"{console.url}/login**")  # the browser went to the console, sent by the page
            expect(page.locator("p.error")).to_contain_text("login refused: the browser sent it from another site")
            page.goto(f"{console.url}/")
            expect(page.locator("#who")).to_have_text("admin (admin)")  # not mallory


def test_an_account_cannot_make_the_console_call_an_address_of_its_choosing(
    console: Console, model: tuple[str, Script]
) -> None:
    """POST /api/runs naming a model endpoint the configuration does not name is a 422, and nothing is sent there
    (neither the provider key nor any request); the configured endpoint works."""
    seen: list[dict[str, str]] = []

    def respond(_path: str, headers: dict[str, str], _raw: bytes) -> Reply:
        seen.append(headers)
        return Reply(404, {}, b"")

    flow = "name: ssrf\nagents:\n  - id: writer_a\n    instructions: Write it.\n    tools: [write_file]\n"
    with loopback(respond) as elsewhere:
        for body in ({"workflow": flow, "model": f"openai-chat:m@{elsewhere}"},
                     {"workflow": flow.replace("tools:", f"model: openai-chat:m@{elsewhere}\n    tools:")}):
            refused = console.api().post("/api/runs", json=body)
            assert refused.status_code == 422 and "not one the configuration" in refused.text, refused.text
    assert seen == []
    url, script = model
    script.answers = {"writer_a": [envelope("Done. [STATUS: SUCCESS]")]}
    assert console.api().post("/api/runs", json={"workflow": flow, "model": f"openai-chat:m@{url}"}).status_code == 201


def test_serve_never_prints_the_first_token_where_output_is_not_a_terminal(tmp_path: Path) -> None:
    """A container's or a service's log keeps what ``serve`` prints: the first admin token stays in its 0600 file."""
    with serving(tmp_path) as console:
        pass
    assert "a console token was created" in console.output and "cat " in console.output
    assert console.token not in console.output


def test_a_model_url_only_a_lenient_parser_reads_is_refused_too(console: Console) -> None:
    """Ports written "+18002", " 18002" or with a full-width digit: Python's URL parser reads them, so a check that
    trusted an unreadable origin let the console call any address; a file path for the model likewise."""
    flow = "name: ssrf\nagents:\n  - id: writer_a\n    instructions: Write it.\n    tools: [write_file]\n"
    for model in ("openai-chat:m@http://127.0.0.2:+18002", "openai-chat:m@http://127.0.0.2: 18002",
                  "openai-chat:m@http://127.0.0.2:1800\uff12", "local:/etc/passwd"):  # fmt: skip
        refused = console.api().post("/api/runs", json={"workflow": flow, "model": model})
        assert refused.status_code == 422, (model, refused.text)
