"""Who may reach the console and what a browser may do with it: the authentication and CSRF checks, and the
protective headers every response carries.

An attacker controls a web page the operator visits (cross-site forms, framing, script in model output shown by
the console) and anything sent to the port. Every route but the login form and the static files needs an operator
account's token (bearer) or its session cookie, and the account's role must permit what the request does
(``access.mg``: viewers see, operators act, admins administer); a cookie session that changes state must prove it
saw a console page (the CSRF token); no page may be framed, and only the console's own script runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from ..errors import AccessError, AuthenticationError, GroundstateError
from ..store import ACT, ADMINISTER, SEE, Operator, Operators
from .auth import COOKIE, derived, same
from .problems import problem_response

PUBLIC = ("/login", "/static/")
ACCOUNTS = ("/api/operators", "/operators")
METRICS = "/metrics"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
)
DOCS_CSP = "frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"
Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Secrets:
    """The console's key (its first token, from ``console.token``) and the operator accounts it checks tokens
    against. A session cookie and a CSRF token are bound to the key, the account and its current token: rotating or
    removing the account's token ends its sessions."""

    key: str
    operators: Operators

    def session(self, who: Operator) -> str:
        """The session cookie's value for ``who``: their name and a MAC over it (no token in it)."""
        return f"{who.name}.{self._mac('session', who)}"

    def csrf(self, who: Operator) -> str:
        """The CSRF field's value for ``who``'s sessions."""
        return self._mac("csrf", who)

    def from_cookie(self, cookie: str | None) -> Operator | None:
        """The account a session cookie names, if its MAC is right for the account as it is now."""
        name, _, mac = (cookie or "").rpartition(".")
        who = self.operators.get(name) if name else None
        return who if who is not None and same(mac, self._mac("session", who)) else None

    def _mac(self, purpose: str, who: Operator) -> str:
        return derived(self.key, f"{purpose}|{who.name}|{who.token_hash}")


def secrets_of(request: Request) -> Secrets:
    """The app's secrets (a FastAPI dependency)."""
    found: Secrets = request.app.state.secrets
    return found


def operator_of(request: Request) -> Operator:
    """The authenticated operator of this request (a FastAPI dependency)."""
    found: Operator = request.state.operator
    return found


def action_of(method: str, path: str) -> str:
    """What a request does, as ``access.mg`` names actions: managing accounts is administering, any other change
    is acting, reading is seeing."""
    if path.startswith(ACCOUNTS):
        return ADMINISTER
    return SEE if method in ("GET", "HEAD", "OPTIONS") else ACT


def install(app: FastAPI, secrets: Secrets, public: tuple[str, ...] = ()) -> None:
    """Authentication inside, protective headers outside (so refusals and redirects carry them too). ``public``:
    further paths served without the token (``/metrics`` when the configuration opens it)."""
    app.state.secrets = secrets
    open_paths = PUBLIC + public

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Handler) -> Response:
        try:
            return await _authenticated(request, call_next, secrets, open_paths)
        except GroundstateError as exc:  # the account's row itself cannot be read: the JSON answer, no traceback
            return problem_response(exc)

    @app.middleware("http")
    async def protective_headers(request: Request, call_next: Handler) -> Response:
        response = await call_next(request)
        docs = request.url.path == "/api/docs"  # FastAPI's Swagger page needs its inline script
        response.headers["Content-Security-Policy"] = DOCS_CSP if docs else CSP
        response.headers["X-Frame-Options"] = "DENY"  # a click on a framed Abort button is an operator's decision
        response.headers["X-Content-Type-Options"] = "nosniff"
        # no URL of the console (a login link's token) reaches another site, and the console's own forms still say
        # where they come from (under no-referrer a browser sends "Origin: null", which login refuses without fetch
        # metadata: see cross_site)
        response.headers["Referrer-Policy"] = "same-origin"
        return response


async def _authenticated(request: Request, call_next: Handler, secrets: Secrets, public: tuple[str, ...]) -> Response:
    path = request.url.path
    if path.startswith(public):
        return await call_next(request)
    header = request.headers.get("authorization", "")
    bearer = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else None
    by_bearer = secrets.operators.authenticate(bearer)
    who = by_bearer or secrets.from_cookie(request.cookies.get(COOKIE))
    if who is None:
        if path.startswith(("/api/", METRICS)):  # clients and scrapers get a status, not a login page
            return problem_response(AuthenticationError("missing or wrong token"))
        return RedirectResponse(f"/login?next={path}", status_code=303)
    request.state.operator = who
    request.state.csrf = secrets.csrf(who)
    action = action_of(request.method, path)
    if not who.may(action):
        return problem_response(AccessError(f"operator {who.name!r} is a {who.role}, who may not {action}"))
    if request.method not in ("GET", "HEAD", "OPTIONS") and by_bearer is None:  # a browser session changing state
        form = request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
        if form and _form_path(path):
            request.state.csrf_from_form = True  # the page's handler checks the form's csrf field
        elif not same(request.headers.get("x-csrf-token"), request.state.csrf):
            return problem_response(AccessError("missing or wrong CSRF token"))
    return await call_next(request)


async def checked_form(request: Request) -> Any:
    """The posted form, refused unless a cookie session sent the right CSRF field (bearer needs none)."""
    form = await request.form()
    field = form.get("csrf")
    sent = field if isinstance(field, str) else None
    if getattr(request.state, "csrf_from_form", False) and not same(sent, request.state.csrf):
        raise AccessError("missing or wrong CSRF token")
    return form


def cross_site(request: Request) -> str | None:
    """Why a login request is refused as sent by another site's page, or None. A page the operator's browser opens can
    submit a form to ``/login`` or navigate to ``/login?token=…`` with the token of an account its author holds: the
    browser would be logged into that account, and the operator's next decisions recorded under it (login CSRF). A
    browser says where a request comes from: ``Sec-Fetch-Site`` (``same-site`` too is refused: another port of
    127.0.0.1 is the same site), else — a browser that sends no fetch metadata, or a console served over plain HTTP on
    a non-loopback address, where browsers send none — ``Origin`` (sent with every POST; ``null`` from sandboxed and
    opaque pages; the console's own pages send theirs: ``Referrer-Policy: same-origin``), else ``Referer``. Clients
    that send none of them are not browsers, and nobody's session is at stake."""
    site = request.headers.get("sec-fetch-site")
    if site in ("cross-site", "same-site"):
        return f"the browser sent it from another site's page (Sec-Fetch-Site: {site})"
    if site is not None:
        return None  # none or same-origin: the browser's own word, over Origin (Chromium may send "null" for both)
    own = _host(request.headers.get("host", ""), request.url.scheme)
    origin = request.headers.get("origin")
    if origin is not None and (origin == "null" or _origin_host(origin) != own):
        return f"it came from another origin (Origin: {origin[:100]})"
    referer = request.headers.get("referer")
    if referer and _origin_host(referer) != own:
        return f"it came from another site's page (Referer: {referer[:100]})"
    return None


def user_navigation(request: Request) -> bool:
    """Whether the browser says the operator opened this URL themselves — typed, a bookmark, a link clicked in a
    terminal or another program (``Sec-Fetch-Site: none``) — or from a console page (``same-origin``)."""
    return request.headers.get("sec-fetch-site") in ("none", "same-origin")


def _origin_host(url: str) -> str:
    parts = urlsplit(url)
    return _host(parts.netloc, parts.scheme)


def _host(netloc: str, scheme: str) -> str:
    """``host[:port]`` lower-cased, without the scheme's default port (a proxy may name it or not)."""
    netloc = netloc.lower()
    default = {"http": ":80", "https": ":443"}.get(scheme.lower(), "")
    return netloc.removesuffix(default) if default else netloc


def logged_in(target: str, secrets: Secrets, who: Operator) -> Response:
    """A redirect to ``target`` that sets ``who``'s session cookie."""
    response = RedirectResponse(local(target), status_code=303)
    response.set_cookie(COOKIE, secrets.session(who), httponly=True, samesite="strict")
    return response


def local(target: str) -> str:
    """Only same-site paths after login (no open redirect)."""
    return target if target.startswith("/") and not target.startswith("//") else "/"


def _form_path(path: str) -> bool:
    """The pages that take HTML forms (and check their CSRF field themselves)."""
    parts = path.strip("/").split("/")
    decide = len(parts) == 3 and parts[0] in ("runs", "calls") and parts[2] == "decide"
    return path == "/runs" or decide
