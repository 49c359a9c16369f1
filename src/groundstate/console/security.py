"""Who may reach the console and what a browser may do with it: the authentication and CSRF checks, and the
protective headers every response carries.

An attacker controls a web page the operator visits (cross-site forms, framing, script in model output shown by
the console) and anything sent to the port. Every route but the login form and the static files needs the bearer
token or the session cookie; a cookie session that changes state must prove it saw a console page (the CSRF
token); no page may be framed, and only the console's own script runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from .auth import COOKIE, derived, same

PUBLIC = ("/login", "/static/")
METRICS = "/metrics"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
)
DOCS_CSP = "frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"
Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Secrets:
    """The token and the two values bound to it (neither reveals the token)."""

    token: str
    session: str
    csrf: str

    @classmethod
    def of(cls, token: str) -> Secrets:
        """The session cookie's and the CSRF field's values for ``token``."""
        return cls(token, derived(token, "session"), derived(token, "csrf"))


def secrets_of(request: Request) -> Secrets:
    """The app's secrets (a FastAPI dependency)."""
    found: Secrets = request.app.state.secrets
    return found


def install(app: FastAPI, secrets: Secrets, public: tuple[str, ...] = ()) -> None:
    """Authentication inside, protective headers outside (so refusals and redirects carry them too). ``public``:
    further paths served without the token (``/metrics`` when the configuration opens it)."""
    app.state.secrets = secrets
    open_paths = PUBLIC + public

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Handler) -> Response:
        return await _authenticated(request, call_next, secrets, open_paths)

    @app.middleware("http")
    async def protective_headers(request: Request, call_next: Handler) -> Response:
        response = await call_next(request)
        docs = request.url.path == "/api/docs"  # FastAPI's Swagger page needs its inline script
        response.headers["Content-Security-Policy"] = DOCS_CSP if docs else CSP
        response.headers["X-Frame-Options"] = "DENY"  # a click on a framed Abort button is an operator's decision
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response


async def _authenticated(request: Request, call_next: Handler, secrets: Secrets, public: tuple[str, ...]) -> Response:
    path = request.url.path
    if path.startswith(public):
        return await call_next(request)
    header = request.headers.get("authorization", "")
    bearer = same(header.removeprefix("Bearer ").strip(), secrets.token) if header.startswith("Bearer ") else False
    cookie = same(request.cookies.get(COOKIE), secrets.session)
    if not bearer and not cookie:
        if path.startswith(("/api/", METRICS)):  # clients and scrapers get a status, not a login page
            return JSONResponse({"detail": "missing or wrong token"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})  # fmt: skip
        return RedirectResponse(f"/login?next={path}", status_code=303)
    if request.method not in ("GET", "HEAD", "OPTIONS") and not bearer:  # a browser session changing state
        form = request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
        if form and _form_path(path):
            request.state.csrf_from_form = True  # the page's handler checks the form's csrf field
        elif not same(request.headers.get("x-csrf-token"), secrets.csrf):
            return JSONResponse({"detail": "missing or wrong CSRF token"}, status_code=403)
    return await call_next(request)


async def checked_form(request: Request) -> Any:
    """The posted form, refused unless a cookie session sent the right CSRF field (bearer needs none)."""
    form = await request.form()
    field = form.get("csrf")
    sent = field if isinstance(field, str) else None
    if getattr(request.state, "csrf_from_form", False) and not same(sent, secrets_of(request).csrf):
        raise HTTPException(403, "missing or wrong CSRF token")
    return form


def logged_in(target: str, secrets: Secrets) -> Response:
    """A redirect to ``target`` that sets the session cookie."""
    response = RedirectResponse(local(target), status_code=303)
    response.set_cookie(COOKIE, secrets.session, httponly=True, samesite="strict")
    return response


def local(target: str) -> str:
    """Only same-site paths after login (no open redirect)."""
    return target if target.startswith("/") and not target.startswith("//") else "/"


def _form_path(path: str) -> bool:
    """The pages that take HTML forms (and check their CSRF field themselves)."""
    parts = path.strip("/").split("/")
    decide = len(parts) == 3 and parts[0] in ("runs", "calls") and parts[2] == "decide"
    return path == "/runs" or decide
