"""The console's HTTP API under ``/api/`` (bearer token, or a session cookie with the CSRF header)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ..runtime import pauses_json
from ..store import ACT, ADMINISTER, SEE, Operator
from .operations import Operations, operations
from .problems import MAX_NUMBER, After, EntryId
from .security import operator_of
from .views import run_json, why_json

router = APIRouter(prefix="/api")
Ops = Annotated[Operations, Depends(operations)]
Who = Annotated[Operator, Depends(operator_of)]


class Decision(BaseModel):
    """An operator's decision on one open pause of a run, named by its id (``pause``); recorded as the
    authenticated operator's: a body naming someone else is refused, not ignored."""

    model_config = ConfigDict(extra="forbid")
    pause: int = Field(ge=0, le=MAX_NUMBER)  # the open pause this answers (its id in "pauses" and /api/approvals)
    decision: str
    instructions: str | None = None


class CallDecision(BaseModel):
    """An operator's decision on a tools/call the MCP guard holds; ``digest`` (optional) must be the call's."""

    model_config = ConfigDict(extra="forbid")
    decision: str  # approve or deny
    digest: str | None = None


class NewOperator(BaseModel):
    """An account to create (an admin's action); the answer carries its token, shown this once."""

    model_config = ConfigDict(extra="forbid")
    name: str
    role: str


class RoleChange(BaseModel):
    """A new role for an account."""

    model_config = ConfigDict(extra="forbid")
    role: str


class NewRun(BaseModel):
    """A run to start: a workflow's YAML text or the name of a bundled example."""

    model_config = ConfigDict(extra="forbid")

    workflow: str | None = None
    example: str | None = None
    model: str | None = None  # None: the configuration's models.default, else local


@router.get("/runs")
def api_runs(ops: Ops) -> list[dict[str, Any]]:
    """Every run, newest first (``run_id``, as ``POST /api/runs`` and ``/api/approvals`` name it); a run whose row
    cannot be read is listed last, its ``status`` ``unreadable`` and its ``problem`` said."""
    return [{"run_id": row["id"], **{k: v for k, v in row.items() if k != "id"},
             **{at: str(row[at]) if row[at] is not None else None for at in ("created_at", "updated_at")}}
            for row in ops.runtime.store.runs()]  # fmt: skip


@router.post("/runs", status_code=201)
async def api_create(body: NewRun, ops: Ops, who: Who) -> dict[str, str]:  # async: driven on the server's loop
    """Start a run; it is driven by the console's process."""
    return {"run_id": ops.create(body.workflow, body.example, body.model, who)}


@router.get("/runs/{run_id}")
def api_run(run_id: str, ops: Ops) -> dict[str, Any]:
    """The run's state."""
    return run_json(ops.state(run_id))


@router.get("/runs/{run_id}/events")
def api_events(run_id: str, ops: Ops, after: After = 0) -> list[dict[str, Any]]:
    """The run's events after ``after``."""
    ops.state(run_id)
    return [e.to_json() for e in ops.runtime.store.events(run_id, after)]


@router.get("/runs/{run_id}/stream")
async def api_stream(run_id: str, request: Request, ops: Ops, after: After = 0) -> StreamingResponse:
    """The run's events as server-sent events, as they are appended."""
    ops.state(run_id)

    async def events() -> AsyncIterator[bytes]:
        last = after
        while not await request.is_disconnected():
            for event in ops.runtime.store.events(run_id, last):
                last = event.seq
                yield f"id: {event.seq}\nevent: run\ndata: {json.dumps(event.to_json())}\n\n".encode()
            yield b": keep-alive\n\n"
            await asyncio.sleep(0.5)

    return StreamingResponse(events(), media_type="text/event-stream")


@router.post("/runs/{run_id}/decision")
async def api_decide(run_id: str, body: Decision, ops: Ops, who: Who) -> dict[str, Any]:
    """Decide one open pause of the run (retry, skip or abort); 409 when it is no longer open."""
    return run_json(ops.decide(run_id, body.pause, body.decision, body.instructions, who))


UNREADABLE_HEADER = "Groundstate-Unreadable-Runs"
MAX_HEADER_CHARS = 4000  # well under the 8 KiB a proxy or a client reads in one header line


def unreadable_header(run_ids: list[str]) -> str:
    """The unreadable runs' ids for the header, percent-encoded and comma-separated; past ``MAX_HEADER_CHARS`` (ids
    written into the store by hand can be of any length) the rest are counted, ``+N more`` (``GET /api/runs`` lists
    them all)."""
    shown: list[str] = []
    used = 0
    for number, run_id in enumerate(run_ids):
        encoded = quote(run_id, safe="")
        if used + len(encoded) + 1 > MAX_HEADER_CHARS:
            return ",".join([*shown, f"+{len(run_ids) - number} more"])
        shown.append(encoded)
        used += len(encoded) + 1
    return ",".join(shown)


@router.get("/approvals")
def api_approvals(ops: Ops, response: Response) -> list[dict[str, Any]]:
    """Every pause waiting for a decision, across runs (the inbox): each with its run, id, agent, category,
    reason, hint, derivation and age. A run awaiting a decision whose log cannot be read is left out of the list
    and named in the ``Groundstate-Unreadable-Runs`` header (comma-separated ids; ``GET /api/runs/ID`` says why)."""
    awaiting = ops.runtime.store.awaiting()
    if awaiting.unreadable:
        response.headers[UNREADABLE_HEADER] = unreadable_header(list(awaiting.unreadable))
    return [pause for state in awaiting.states for pause in pauses_json(state)]


@router.get("/runs/{run_id}/why")
def api_why(run_id: str, ops: Ops) -> list[dict[str, Any]]:
    """Why the run paused, each time: the rules and facts that derived ``needs_approval``."""
    ops.state(run_id)
    return why_json(ops.runtime.store.events(run_id))


@router.get("/workflows")
def api_workflows(ops: Ops) -> list[dict[str, str]]:
    """The bundled example workflows."""
    return [{"name": p.stem, "workflow": p.read_text(encoding="utf-8")} for p in ops.examples()]


@router.get("/mcp/calls")
def api_calls(ops: Ops, status: str | None = None) -> list[dict[str, Any]]:
    """The MCP guard's decisions, newest first (``status=held``: the calls waiting for an operator)."""
    entries = ops.ledger.waiting() if status == "held" else ops.ledger.entries(status)  # only calls still waited for
    return [entry.to_json() for entry in entries]


@router.post("/mcp/calls/{entry_id}/decision")
def api_decide_call(entry_id: EntryId, body: CallDecision, ops: Ops, who: Who) -> dict[str, Any]:
    """Approve or deny a held call (once; refused with 409 when it expired, was decided, or the digest differs)."""
    return ops.decide_call(entry_id, body.decision, who, body.digest).to_json()


@router.get("/me")
def api_me(who: Who) -> dict[str, Any]:
    """The account this request is authenticated as, and what its role may do."""
    return {**who.to_json(), "may": sorted(action for action in (SEE, ACT, ADMINISTER) if who.may(action))}


@router.get("/operators")
def api_operators(ops: Ops) -> list[dict[str, Any]]:
    """Every operator account (admins only; never a token)."""
    return [account.to_json() for account in ops.operators.list()]


@router.post("/operators", status_code=201)
def api_add_operator(body: NewOperator, ops: Ops, who: Who) -> dict[str, Any]:
    """Create an account; its token is in this answer and nowhere else."""
    account, token = ops.accounts(lambda accounts: accounts.add(body.name, body.role, who))
    return {**account.to_json(), "token": token}


@router.patch("/operators/{name}")
def api_set_role(name: str, body: RoleChange, ops: Ops, who: Who) -> dict[str, Any]:
    """Change an account's role (the last admin stays an admin)."""
    return ops.accounts(lambda accounts: accounts.set_role(name, body.role, who)).to_json()


@router.post("/operators/{name}/token")
def api_rotate(name: str, ops: Ops, who: Who) -> dict[str, str]:
    """A new token for the account; the old one and its sessions stop working."""
    return {"name": name, "token": ops.accounts(lambda accounts: accounts.rotate(name, who))}


@router.delete("/operators/{name}", status_code=204)
def api_remove_operator(name: str, ops: Ops, who: Who) -> None:
    """Remove an account (not the last admin)."""
    ops.accounts(lambda accounts: accounts.remove(name, who))
