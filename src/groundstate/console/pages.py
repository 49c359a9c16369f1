"""The console's server-rendered pages. Model output is untrusted: Jinja2 autoescapes every page, and the
script only inserts these server-rendered fragments or sets ``textContent``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from ..errors import AccessError, AuthenticationError, GroundstateError, http_problem
from ..runtime import age, attempts_of, current_instructions, usage_line
from ..store import ACT, Operator, verify_store
from .auth import COOKIE
from .graph import dag_svg
from .operations import Operations, operations
from .problems import MAX_NUMBER, BadRequest, EntryId
from .security import Secrets, checked_form, cross_site, local, logged_in, operator_of, secrets_of, user_navigation
from .views import layers, why_json

HERE = Path(str(resources.files("groundstate.console")))
templates = Jinja2Templates(directory=str(HERE / "templates"))
# a run id in a link is one path segment, whatever it holds (an id written into the store by hand: "../x?y#z")
templates.env.filters["segment"] = lambda value: quote(str(value), safe="")
router = APIRouter()
Ops = Annotated[Operations, Depends(operations)]
Keys = Annotated[Secrets, Depends(secrets_of)]
Who = Annotated[Operator, Depends(operator_of)]


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    who: Operator = request.state.operator
    return templates.TemplateResponse(request, name, {"csrf": request.state.csrf, "who": who,
                                                      "may_act": who.may(ACT), **context})  # fmt: skip


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, secrets: Keys, next: str = "/", token: str | None = None) -> Response:
    """The form; or, with ``?token=`` (the link ``groundstate demo`` prints), a log-in. The link logs in at once only
    when the operator opened it themselves (``Sec-Fetch-Site: none``: typed, or clicked in the terminal) and it would
    not replace another account's session; a link another site's page followed is refused, and in any other case the
    page asks first, naming the account (one click posts the form)."""
    if token is None:
        return templates.TemplateResponse(request, "login.html", {"next": local(next), "error": None})
    if (refused := cross_site(request)) is not None:
        return _login_refused(request, next, refused)
    who = secrets.operators.authenticate(token)
    if who is None:
        return _login_error(request, next, AuthenticationError("wrong token"))
    current = secrets.from_cookie(request.cookies.get(COOKIE))
    if user_navigation(request) and (current is None or current.name == who.name):
        return logged_in(next, secrets, who)
    return templates.TemplateResponse(request, "login_confirm.html", {"next": local(next), "token": token,
                                                                      "account": who, "current": current},
                                      headers={"Cache-Control": "no-store"})  # the page holds the token  # fmt: skip


@router.post("/login")
async def login(request: Request, secrets: Keys) -> Response:
    """Log in with an operator's token; the session cookie is set for that account. A form another site's page
    submitted is refused (login CSRF: see ``security.cross_site``)."""
    form = await request.form()
    target = local(str(form.get("next", "/")))
    if (refused := cross_site(request)) is not None:
        return _login_refused(request, target, refused)
    who = secrets.operators.authenticate(str(form.get("token", "")).strip())
    if who is None:
        return _login_error(request, target, AuthenticationError("wrong token"))
    return logged_in(target, secrets, who)


def _login_refused(request: Request, target: str, why: str) -> Response:
    """A 403 login page saying why: nobody is logged in, no session cookie is set or replaced."""
    return _login_error(request, target, AccessError(f"login refused: {why}. Log in here, or open the console's "
                                                     "link yourself."))


def _login_error(request: Request, target: str, error: GroundstateError) -> Response:
    """The login page again, saying what was refused, with the error's status (``errors.HTTP_STATUSES``)."""
    problem = http_problem(error)
    return templates.TemplateResponse(request, "login.html", {"next": local(target), "error": problem.message},
                                      status_code=problem.status)  # fmt: skip


@router.get("/", response_class=HTMLResponse)
def runs_page(request: Request, ops: Ops) -> HTMLResponse:
    """The inbox (every open pause, across runs), every run, and the form that starts a bundled example."""
    examples = [p.stem for p in ops.examples()]
    runs = ops.runtime.store.runs()
    awaiting = ops.runtime.store.awaiting(runs)
    inbox = [(state, pause) for state in reversed(awaiting.states) for pause in state.pauses]
    return _page(request, "runs.html", runs=runs, examples=examples, inbox=inbox, unreadable=awaiting.unreadable,
                 age=age)  # fmt: skip


@router.post("/runs")
async def start_page(request: Request, ops: Ops, who: Who) -> Response:
    """Start a bundled example from the runs page."""
    form = await checked_form(request)
    run_id = ops.create(None, str(form.get("example", "")), str(form.get("model") or "") or None, who)
    return RedirectResponse(f"/runs/{quote(run_id, safe='')}", status_code=303)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str, ops: Ops, fragment: bool = False) -> HTMLResponse:
    """One run: its open pauses as cards, its DAG, each agent's attempts, recent events (``fragment`` for the
    live refresh)."""
    return _run_page(request, run_id, ops, "run_fragment.html" if fragment else "run.html")


def _run_page(request: Request, run_id: str, ops: Ops, name: str, notice: str = "", status: int = 200) -> HTMLResponse:
    state = ops.state(run_id)
    events = ops.runtime.store.events(run_id)
    signing = ops.runtime.settings.audit
    audit = ops.runtime.store.verify(run_id, signing.verifying_key(), signing.sign, listing=True) \
        if name == "run.html" else None  # the whole page, not each live refresh: its chain recomputed  # fmt: skip
    response = _page(request, name, run=state, graph=dag_svg(state, layers(state)), attempts=attempts_of(events),
                     instructions=current_instructions(state), events=events[-40:], usage=usage_line(state), age=age,
                     notice=notice, audit=audit,
                     shadowed=[e for e in events if e.type == "ShadowDisagreed"] if name == "run.html" else [])
    response.status_code = status
    return response


@router.post("/runs/{run_id}/decide")
async def decide_page(request: Request, run_id: str, ops: Ops, who: Who) -> Response:
    """A pause card's buttons: the decision answers the pause the card showed (recorded as the logged-in
    operator's); a pause decided meanwhile is refused on the run's page, saying how it was decided."""
    form = await checked_form(request)
    pause = str(form.get("pause", ""))
    if not (pause.isascii() and pause.isdigit() and len(pause) <= len(str(MAX_NUMBER))):  # '²' is a digit too
        raise BadRequest("the form names no pause: reload the run's page and decide from its card")
    try:
        ops.decide(run_id, int(pause), str(form.get("decision", "")), str(form.get("instructions", "")), who)
    except GroundstateError as exc:  # decided meanwhile (a 409): said on the run's page; anything else as JSON
        problem = http_problem(exc)
        if problem.status != 409:
            raise
        return _run_page(request, run_id, ops, "run.html", f"Not applied: {problem.message}", problem.status)
    return RedirectResponse(f"/runs/{quote(run_id, safe='')}", status_code=303)


@router.get("/runs/{run_id}/kernel", response_class=HTMLResponse)
def kernel_page(request: Request, run_id: str, ops: Ops, secrets: Keys) -> HTMLResponse:
    """The policy behind the run's pauses: the guard rules, the cortex patterns, and why each pause was derived."""
    state = ops.state(run_id)
    pauses = why_json(ops.runtime.store.events(run_id))
    pinned = ops.pinned_policy(state)
    roles = [role.model_dump() for role in pinned.roles] if pinned.roles is not None else None
    limits = json.dumps(pinned.limits.model_dump(mode="json"), indent=2) if pinned.limits is not None else None
    return _page(request, "kernel.html", run=state, pauses=pauses, policy=pinned.guards,
                 patterns=pinned.compiled_patterns, digest=pinned.digest, roles=roles, limits=limits)  # fmt: skip


@router.get("/calls", response_class=HTMLResponse)
def calls_page(request: Request, ops: Ops) -> HTMLResponse:
    """The MCP guard's calls: the held ones as cards to approve or deny, then the latest decisions."""
    held = ops.ledger.waiting()  # withdrawn and expired on the way: a card is only shown while someone waits
    entries = ops.ledger.entries()
    signing = ops.runtime.settings.audit
    audit = verify_store(ops.ledger.engine, signing.verifying_key(), signing.sign)  # the store's chain
    return _page(request, "calls.html", held=held, entries=entries, audit=audit,
                 arguments={e.id: json.dumps(e.arguments, indent=2, ensure_ascii=False) for e in entries})  # fmt: skip


@router.post("/calls/{entry_id}/decide")
async def decide_call_page(request: Request, entry_id: EntryId, ops: Ops, who: Who) -> Response:
    """A card's buttons: the decision applies to the call whose digest the card showed."""
    form = await checked_form(request)
    ops.decide_call(entry_id, str(form.get("decision", "")), who, str(form.get("digest", "")) or None)
    return RedirectResponse("/calls", status_code=303)
