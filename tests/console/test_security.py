"""Every page and API call needs the token; cookie sessions need the CSRF token to change anything."""

from __future__ import annotations

import os
import stat

import httpx

from .conftest import Console


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
                           follow_redirects=False)  # fmt: skip
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
