"""Refusals as the console's HTTP answers: every ``GroundstateError`` a handler raises (or a middleware meets)
becomes the status and stable ``code`` of ``errors.HTTP_STATUSES``, in FastAPI's body shape — ``{"detail":
message, "code": code}`` — so the API, the pages' form posts and the middlewares answer alike."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ..errors import (
    AuthenticationError,
    ConfigurationError,
    GroundstateError,
    InputError,
    NotFoundError,
    http_problem,
    status_code_name,
)

# a sequence number or a ledger entry the client names: never negative (a negative "after" read as a log with a
# hole: a 500 "store_failed"), and within what the database stores (2**63 overflowed: a bare 500); out of range, the
# framework's 422 with its code (``install``)
MAX_NUMBER = 2**62
After = Annotated[int, Query(ge=0, le=MAX_NUMBER)]
EntryId = Annotated[int, Path(ge=0, le=MAX_NUMBER)]


class BadRequest(InputError):
    """A request the console cannot act on as sent (an unknown decision, a form naming no pause)."""


class Unusable(ConfigurationError):
    """A request whose parameters or body do not fit what the route takes (FastAPI's validation)."""


class UnknownExample(NotFoundError):
    """No bundled example has that name."""


def problem_response(error: GroundstateError) -> JSONResponse:
    """The JSON answer to ``error``; a missing credential also says which scheme to use."""
    problem = http_problem(error)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(error, AuthenticationError) else None
    return JSONResponse({"detail": problem.message, "code": problem.code}, problem.status, headers=headers)


def install(app: FastAPI) -> None:
    """Answer every refusal a route raises with its problem (see ``problem_response``) — and what the framework
    answers on its own (an unknown path, a method a route does not take, a body it cannot parse, a parameter out of
    range) in the same shape, with a ``code`` too: a client matches on codes, whoever refused."""

    async def answer(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, GroundstateError)
        return problem_response(error)

    async def framework(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, HTTPException)
        body = {"detail": error.detail, "code": status_code_name(error.status_code)}
        return JSONResponse(body, error.status_code, headers=error.headers)

    async def invalid(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        unusable = http_problem(Unusable(""))  # as FastAPI answers it (its list of what was wrong), with a code
        details = [{key: item.get(key) for key in ("loc", "msg", "type")} for item in error.errors()]
        return JSONResponse({"detail": details, "code": unusable.code}, unusable.status)

    app.add_exception_handler(GroundstateError, answer)
    app.add_exception_handler(HTTPException, framework)
    app.add_exception_handler(RequestValidationError, invalid)
