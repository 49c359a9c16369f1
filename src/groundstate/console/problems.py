"""Refusals as the console's HTTP answers: every ``GroundstateError`` a handler raises (or a middleware meets)
becomes the status and stable ``code`` of ``errors.HTTP_STATUSES``, in FastAPI's body shape — ``{"detail":
message, "code": code}`` — so the API, the pages' form posts and the middlewares answer alike."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ..errors import AuthenticationError, GroundstateError, InputError, NotFoundError, http_problem


class BadRequest(InputError):
    """A request the console cannot act on as sent (an unknown decision, a form naming no pause)."""


class UnknownExample(NotFoundError):
    """No bundled example has that name."""


def problem_response(error: GroundstateError) -> JSONResponse:
    """The JSON answer to ``error``; a missing credential also says which scheme to use."""
    problem = http_problem(error)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(error, AuthenticationError) else None
    return JSONResponse({"detail": problem.message, "code": problem.code}, problem.status, headers=headers)


def install(app: FastAPI) -> None:
    """Answer every refusal a route raises with its problem (see ``problem_response``)."""

    async def answer(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, GroundstateError)
        return problem_response(error)

    app.add_exception_handler(GroundstateError, answer)
