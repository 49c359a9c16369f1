"""Operator accounts: tokens kept only as hashes, the console's first token adopted as the first admin, what each
role may do (access.mg) enforced by the store, the command line, the console's API and pages — and what they record
is the authenticated account, never a typed name."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from groundstate.store import ACT, ADMINISTER, SEE, AccountRefused, NotPermitted, Operators, may, roles

from ..console.conftest import serving


def test_roles_grant_what_access_mg_derives() -> None:
    assert roles() == {"viewer", "operator", "admin"}
    granted = [(role, [a for a in (SEE, ACT, ADMINISTER) if may(role, a)]) for role in ("viewer", "operator", "admin")]
    assert granted == [("viewer", ["see"]), ("operator", ["see", "act"]), ("admin", ["see", "act", "administer"])]
    assert not may("root", SEE)  # a role the rules do not name may nothing


def test_accounts_keep_only_token_hashes_and_an_admin(tmp_path: Path) -> None:
    database = tmp_path / "store.db"
    operators = Operators(f"sqlite:///{database}", first_admin_token="first-token")
    Operators(f"sqlite:///{database}", first_admin_token="another")  # adopted once: a second token is not an admin
    admin = operators.authenticate("first-token")
    assert admin is not None and (admin.name, admin.role) == ("admin", "admin")
    assert operators.authenticate("another") is None
    dana, token = operators.add("dana", "operator", admin)
    assert dana.created_by == "admin" and token.startswith("gso_") and operators.authenticate(token) == dana
    stored = sqlite3.connect(database).execute("SELECT * FROM operators").fetchall()
    assert token not in repr(stored) and "first-token" not in repr(stored)  # hashes only
    assert oct(database.stat().st_mode & 0o777) == "0o600"

    with pytest.raises(NotPermitted, match="'dana' is a operator: a operator may not administer"):
        operators.add("eve", "viewer", dana)
    for name, role, message in [("Dana", "viewer", "operator name 'Dana'"), ("eve", "root", "unknown role 'root'"),
                                ("dana", "viewer", "already an operator called 'dana'")]:  # fmt: skip
        with pytest.raises(AccountRefused, match=message):
            operators.add(name, role, admin)
    with pytest.raises(AccountRefused, match="'admin' is the last admin"):
        operators.set_role("admin", "operator", admin)
    with pytest.raises(AccountRefused, match="'admin' is the last admin"):
        operators.remove("admin", admin)
    assert operators.get("admin") is not None  # the refused change rolled back

    renewed = operators.rotate("dana", dana)  # one's own token
    assert operators.authenticate(token) is None and operators.authenticate(renewed) is not None
    with pytest.raises(NotPermitted):
        operators.rotate("admin", dana)  # not another's
    operators.set_role("dana", "admin", admin)
    operators.remove("admin", operators.authenticate(renewed))  # type: ignore[arg-type]
    assert operators.authenticate("first-token") is None and [o.name for o in operators.list()] == ["dana"]


def cli(tmp_path: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")}
    env.pop("GROUNDSTATE_TOKEN", None)
    env.pop("GROUNDSTATE_CONFIG", None)
    if token is not None:
        env["GROUNDSTATE_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "groundstate", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_the_operators_command_acts_as_the_tokens_account(tmp_path: Path) -> None:
    added = cli(tmp_path, "operators", "add", "olga", "--role", "operator")  # as console.token, the first admin
    assert added.returncode == 0 and "operator olga (operator) created" in added.stdout, added.stderr
    olga = added.stdout.split()[-1]
    refused = cli(tmp_path, "operators", "add", "mallory", "--role", "admin", token=olga)
    assert refused.returncode == 1 and "'olga' is a operator: a operator may not administer" in refused.stderr
    unknown = cli(tmp_path, "operators", "list", token="gso_guessed")
    assert unknown.returncode == 2 and "belongs to no operator account" in unknown.stderr
    listed = cli(tmp_path, "operators", "list", token=olga)  # an operator may see the accounts
    assert [line.split('"role": ')[1].split(",")[0] for line in listed.stdout.splitlines()] == ['"admin"', '"operator"']
    assert olga not in listed.stdout
    assert cli(tmp_path, "operators", "role", "olga", "viewer").stdout.strip() == "operator olga is now viewer"
    rotated = cli(tmp_path, "operators", "rotate", "olga", token=olga)  # a viewer may renew their own token
    assert rotated.returncode == 0 and cli(tmp_path, "operators", "list", token=olga).returncode == 2
    assert cli(tmp_path, "operators", "remove", "olga").stdout.strip() == "operator olga removed"
    last = cli(tmp_path, "operators", "remove", "admin")
    assert last.returncode == 1 and "the last admin" in last.stderr


def test_the_console_authenticates_accounts_and_obeys_their_roles(tmp_path: Path) -> None:
    with serving(tmp_path) as console:
        viewer, operator = console.account("vic", "viewer"), console.account("olga", "operator")
        with console.api(viewer) as api:
            assert api.get("/api/me").json()["may"] == ["see"]
            assert api.get("/api/runs").status_code == 200
            started = api.post("/api/runs", json={"example": "market-brief"})
            assert started.status_code == 403 and "'vic' is a viewer, who may not act" in started.json()["detail"]
        with console.api(operator) as api:
            assert api.get("/api/operators").status_code == 403  # accounts are an admin's
            assert api.post("/api/operators", json={"name": "x", "role": "admin"}).status_code == 403
        with console.api() as admin:
            assert [a["name"] for a in admin.get("/api/operators").json()] == ["admin", "olga", "vic"]
            assert admin.patch("/api/operators/admin", json={"role": "viewer"}).status_code == 409  # the last admin
            assert admin.post("/api/operators", json={"name": "vic", "role": "viewer"}).status_code == 409

        browser = httpx.Client(base_url=console.url, timeout=30)
        logged_in = browser.post("/login", data={"token": viewer, "next": "/"})
        assert logged_in.status_code == 303
        page = browser.get("/").text
        assert "vic (viewer)" in page and "Start a run" not in page  # no form a viewer could not use
        assert "Start a run" in console.api().get("/").text
        with console.api() as admin:
            rotated = admin.post("/api/operators/vic/token")
        assert rotated.status_code == 200
        after = browser.get("/calls")  # the session ended with the token it was opened with
        assert after.status_code == 303 and after.headers["location"].startswith("/login")
        assert console.api(viewer).get("/api/runs").status_code == 401
        assert console.api(rotated.json()["token"]).get("/api/runs").status_code == 200
        with console.api() as admin:
            assert admin.delete("/api/operators/vic").status_code == 204
        assert console.api(rotated.json()["token"]).get("/api/runs").status_code == 401
