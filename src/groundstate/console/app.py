"""The operator console: a FastAPI application with an HTTP API under ``/api/`` and server-rendered pages.

Model output is untrusted: every page is rendered by Jinja2 with autoescaping, the script only ever inserts
server-rendered (escaped) fragments or sets ``textContent``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel

from ..runtime import DECISIONS, DecisionError, RunState, Runtime, StoreError, WorkflowError, parse_workflow
from .auth import COOKIE, derived, same

HERE = Path(str(resources.files("groundstate.console")))
EXAMPLES = Path(str(resources.files("groundstate.runtime") / "examples"))
PUBLIC = ("/login", "/static/")


class Decision(BaseModel):
    decision: str
    instructions: str | None = None
    operator: str = "api"


class NewRun(BaseModel):
    workflow: str | None = None  # YAML text
    example: str | None = None  # or the name of a bundled example
    model: str = "local"


CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
)
DOCS_CSP = "frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"


def create_app(runtime: Runtime, token: str) -> FastAPI:
    app = FastAPI(title="groundstate console", version="1", docs_url="/api/docs", openapi_url="/api/openapi.json",
                  redoc_url=None)  # fmt: skip
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    session, csrf = derived(token, "session"), derived(token, "csrf")
    token_value = token
    drives: dict[str, asyncio.Task[RunState]] = {}

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        if path.startswith(PUBLIC):
            return await call_next(request)
        header = request.headers.get("authorization", "")
        bearer = same(header.removeprefix("Bearer ").strip(), token) if header.startswith("Bearer ") else False
        cookie = same(request.cookies.get(COOKIE), session)
        if not bearer and not cookie:
            if path.startswith("/api/"):
                return JSONResponse({"detail": "missing or wrong token"}, status_code=401,
                                    headers={"WWW-Authenticate": "Bearer"})  # fmt: skip
            return RedirectResponse(f"/login?next={path}", status_code=303)
        if request.method not in ("GET", "HEAD", "OPTIONS") and not bearer:  # a browser session changing state
            form = request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
            if form and _form_path(path):
                request.state.csrf_from_form = True  # the page's handler checks the form's csrf field
            elif not same(request.headers.get("x-csrf-token"), csrf):
                return _csrf_refused()
        return await call_next(request)

    @app.middleware("http")
    async def protective_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        """Added last, so it wraps everything (refusals and redirects too): no page may be framed by another site
        — a click on a framed Abort button is an operator's decision — and only the console's own script runs."""
        response = await call_next(request)
        docs = request.url.path == "/api/docs"  # FastAPI's Swagger page needs its inline script
        response.headers["Content-Security-Policy"] = DOCS_CSP if docs else CSP
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    async def checked_form(request: Request) -> Any:
        """The posted form, refused unless a cookie session sent the right CSRF field (bearer needs none)."""
        form = await request.form()
        if getattr(request.state, "csrf_from_form", False) and not same(_text(form.get("csrf")), csrf):
            raise HTTPException(403, "missing or wrong CSRF token")
        return form

    def start(run_id: str) -> None:
        task = drives.get(run_id)
        if task is None or task.done():
            drives[run_id] = asyncio.create_task(runtime.drive(run_id))

    def state_or_404(run_id: str) -> RunState:
        try:
            return runtime.store.state(run_id)
        except StoreError as exc:
            raise HTTPException(404, str(exc)) from None

    def decide(run_id: str, decision: str, instructions: str | None, operator: str) -> RunState:
        state_or_404(run_id)
        try:
            state = runtime.decide(run_id, decision, instructions or None, actor=f"console:{operator or 'operator'}")
        except DecisionError as exc:
            raise HTTPException(409, str(exc)) from None
        if state.status == "running":
            start(run_id)
        return state

    def create(body: NewRun) -> str:
        text = body.workflow
        if body.example is not None:
            path = EXAMPLES / f"{body.example}.yaml"
            if "/" in body.example or not path.exists():
                raise HTTPException(404, f"there is no bundled example {body.example!r}")
            text = path.read_text(encoding="utf-8")
        if not text:
            raise HTTPException(422, "give a workflow (YAML text) or the name of a bundled example")
        try:
            run_id = runtime.create(text, "console", body.model)
        except (WorkflowError, ValueError) as exc:
            raise HTTPException(422, str(exc)) from None
        start(run_id)
        return run_id

    # -- the API ---------------------------------------------------------------------------------------
    @app.get("/api/runs")
    def api_runs() -> list[dict[str, Any]]:
        return [{**row, "created_at": str(row["created_at"]), "updated_at": str(row["updated_at"])}
                for row in runtime.store.runs()]  # fmt: skip

    @app.post("/api/runs", status_code=201)
    async def api_create(body: NewRun) -> dict[str, str]:  # async: the run is driven on the server's loop
        return {"run_id": create(body)}

    @app.get("/api/runs/{run_id}")
    def api_run(run_id: str) -> dict[str, Any]:
        return run_json(state_or_404(run_id))

    @app.get("/api/runs/{run_id}/events")
    def api_events(run_id: str, after: int = 0) -> list[dict[str, Any]]:
        state_or_404(run_id)
        return [e.to_json() for e in runtime.store.events(run_id, after)]

    @app.get("/api/runs/{run_id}/stream")
    async def api_stream(run_id: str, request: Request, after: int = 0) -> StreamingResponse:
        state_or_404(run_id)

        async def events() -> AsyncIterator[bytes]:
            last = after
            while not await request.is_disconnected():
                for event in runtime.store.events(run_id, last):
                    last = event.seq
                    yield f"id: {event.seq}\nevent: run\ndata: {json.dumps(event.to_json())}\n\n".encode()
                yield b": keep-alive\n\n"
                await asyncio.sleep(0.5)

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/api/runs/{run_id}/decision")
    async def api_decide(run_id: str, body: Decision) -> dict[str, Any]:
        if body.decision not in DECISIONS:
            raise HTTPException(422, f"decision must be one of {', '.join(DECISIONS)}")
        return run_json(decide(run_id, body.decision, body.instructions, body.operator))

    @app.get("/api/approvals")
    def api_approvals() -> list[dict[str, Any]]:
        """Every pause waiting for a decision, across runs."""
        out = []
        for row in runtime.store.runs():
            if row["status"] == "awaiting_approval":
                state = runtime.store.state(row["id"])
                out += [{"run_id": row["id"], "agent": p.agent, "category": p.category, "reason": p.reason,
                         "hint": p.hint, "seq": p.seq} for p in state.pauses]  # fmt: skip
        return out

    @app.get("/api/runs/{run_id}/why")
    def api_why(run_id: str) -> list[dict[str, Any]]:
        """Why the run paused, each time: the rules and facts that derived ``needs_approval``."""
        state_or_404(run_id)
        return [{"seq": e.seq, "agent": e.agent, "reason": e.payload["reason"], "why": e.payload.get("why")}
                for e in runtime.store.events(run_id) if e.type == "ApprovalRequested"]  # fmt: skip

    @app.get("/api/workflows")
    def api_workflows() -> list[dict[str, str]]:
        return [{"name": p.stem, "workflow": p.read_text(encoding="utf-8")} for p in sorted(EXAMPLES.glob("*.yaml"))]

    # -- pages -----------------------------------------------------------------------------------------
    def page(request: Request, name: str, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"csrf": csrf, **context})

    def logged_in(target: str) -> Response:
        response = RedirectResponse(_local(target), status_code=303)
        response.set_cookie(COOKIE, session, httponly=True, samesite="strict")
        return response

    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request, next: str = "/", token: str | None = None) -> Response:
        """The form; or, with ``?token=`` (the link ``groundstate demo`` prints), a direct log-in."""
        if token is not None and same(token, token_value):
            return logged_in(next)
        error = None if token is None else "wrong token"
        return templates.TemplateResponse(request, "login.html", {"next": _local(next), "error": error},
                                          status_code=200 if error is None else 401)  # fmt: skip

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form()
        target = _local(str(form.get("next", "/")))
        if not same(str(form.get("token", "")).strip(), token):
            return templates.TemplateResponse(request, "login.html", {"next": target, "error": "wrong token"},
                                              status_code=401)  # fmt: skip
        return logged_in(target)

    @app.get("/", response_class=HTMLResponse)
    def runs_page(request: Request) -> HTMLResponse:
        examples = [p.stem for p in sorted(EXAMPLES.glob("*.yaml"))]
        return page(request, "runs.html", runs=runtime.store.runs(), examples=examples)

    @app.post("/runs")
    async def start_page(request: Request) -> Response:
        form = await checked_form(request)
        run_id = create(NewRun(example=str(form.get("example", "")), model=str(form.get("model") or "local")))
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def run_page(request: Request, run_id: str, fragment: bool = False) -> HTMLResponse:
        state = state_or_404(run_id)
        name = "run_fragment.html" if fragment else "run.html"
        return page(request, name, run=state, layers=_layers(state), instructions=_instructions(state),
                    events=runtime.store.events(run_id)[-40:])  # fmt: skip

    @app.post("/runs/{run_id}/decide")
    async def decide_page(request: Request, run_id: str) -> Response:
        form = await checked_form(request)
        decision = str(form.get("decision", ""))
        if decision not in DECISIONS:
            raise HTTPException(422, f"decision must be one of {', '.join(DECISIONS)}")
        decide(run_id, decision, str(form.get("instructions", "")), str(form.get("operator", "operator")))
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    @app.get("/runs/{run_id}/kernel", response_class=HTMLResponse)
    def kernel_page(request: Request, run_id: str) -> HTMLResponse:
        state = state_or_404(run_id)
        pauses = api_why(run_id)
        policy = (Path(str(resources.files("groundstate.runtime") / "defaults" / "guards.mg"))).read_text()
        return page(request, "kernel.html", run=state, pauses=pauses, policy=policy, patterns=runtime.patterns)

    app.state.drives = drives
    return app


def _instructions(state: RunState) -> dict[str, str]:
    """Each agent's current instructions: the operator's edit, or the workflow's."""
    specs = {a.id: a.instructions for a in parse_workflow(state.workflow, state.run_id).agents}
    specs.update({spec["id"]: spec.get("instructions", "") for spec in state.spawned})
    return {agent: node.instructions or specs.get(agent, "") for agent, node in state.nodes.items()}


def run_json(state: RunState) -> dict[str, Any]:
    instructions = _instructions(state)
    return {
        "run_id": state.run_id, "name": state.name, "status": state.status, "model": state.model,
        "outcome": state.outcome,
        "nodes": {a: {"status": n.status, "attempts": n.attempts, "output": n.output, "thinking": n.thinking,
                      "status_tag": n.status_tag,
                      "instructions": instructions[a], "tools": n.tools, "error": n.error}
                  for a, n in state.nodes.items()},
        "pause": None if state.pause is None else {
            "agent": state.pause.agent, "category": state.pause.category, "reason": state.pause.reason,
            "hint": state.pause.hint, "others": state.pause.others, "seq": state.pause.seq},
    }  # fmt: skip


def _layers(state: RunState) -> list[list[tuple[str, list[str]]]]:
    """The DAG in columns: each agent one column right of its deepest dependency."""
    workflow = parse_workflow(state.workflow, state.run_id)
    depends = {a.id: a.depends_on for a in workflow.agents}
    for spec in state.spawned:
        depends[spec["id"]] = spec.get("depends_on", [])
    depth: dict[str, int] = {}
    for agent in state.nodes:
        depth[agent] = 1 + max((depth.get(d, 0) for d in depends.get(agent, [])), default=-1)
    columns: list[list[tuple[str, list[str]]]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for agent in state.nodes:
        columns[depth[agent]].append((agent, depends.get(agent, [])))
    return columns


def _form_path(path: str) -> bool:
    """The pages that take HTML forms (and check their CSRF field themselves)."""
    parts = path.strip("/").split("/")
    return path == "/runs" or (len(parts) == 3 and parts[0] == "runs" and parts[2] == "decide")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _csrf_refused() -> JSONResponse:
    return JSONResponse({"detail": "missing or wrong CSRF token"}, status_code=403)


def _local(target: str) -> str:
    """Only same-site paths after login (no open redirect)."""
    return target if target.startswith("/") and not target.startswith("//") else "/"
