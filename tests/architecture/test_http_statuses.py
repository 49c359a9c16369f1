"""One status table for every HTTP surface (``errors.HTTP_STATUSES``), stable error codes, and no status literal
of an error anywhere else in the source: a new refusal gets its status from its kind, never from a number typed
where it is raised."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from groundstate.errors import (
    AccessError,
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    ExecutorError,
    GroundstateError,
    InputError,
    LimitError,
    NotFoundError,
    PolicyError,
    StateConflict,
    StoreError,
    UpstreamFailed,
    exit_code,
    http_problem,
)
from groundstate.guard import ApprovalRefused
from groundstate.providers import (
    ChatRequestError,
    ReplyCutOff,
    ReplyRefused,
    RequestTooLarge,
    UnknownPath,
    UpstreamFailure,
    problem_body,
)
from groundstate.runtime import DecisionConflict, DecisionError, LeaseHeld, UnknownRun, WorkflowError
from groundstate.store import AccountConflict, BadAccountName, NotAuthenticated, NotPermitted, UnknownOperator

SOURCE = Path(__file__).parents[2] / "src" / "groundstate"


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [(NotFoundError, 404, "not_found"), (ConflictError, 409, "conflict"), (StateConflict, 409, "state_conflict"),
     (AuthenticationError, 401, "unauthenticated"), (AccessError, 403, "forbidden"), (LimitError, 413, "too_large"),
     (UpstreamFailed, 502, "upstream_failed"), (ConfigurationError, 422, "unusable"), (InputError, 400, "bad_input"),
     (PolicyError, 403, "refused"), (StoreError, 500, "store_failed"), (ExecutorError, 500, "executor_failed"),
     (GroundstateError, 500, "failed")],
)  # fmt: skip
def test_each_kind_has_its_status_and_code(kind: type[GroundstateError], status: int, code: str) -> None:
    problem = http_problem(kind("what went wrong"))
    assert (problem.status, problem.code, problem.message) == (status, code, "what went wrong")


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [(UnknownRun("there is no run r"), 404, "not_found"), (LeaseHeld("held"), 409, "conflict"),
     (DecisionConflict("pause 3 is no longer open"), 409, "state_conflict"),
     (DecisionError("unknown decision 'maybe'"), 400, "bad_input"),
     (ApprovalRefused("call 7 was decided"), 409, "conflict"),
     (AccountConflict("the last admin"), 409, "state_conflict"), (UnknownOperator("no dana"), 404, "not_found"),
     (BadAccountName("operator name 'A B'"), 400, "bad_input"),
     (NotAuthenticated("no account"), 401, "unauthenticated"), (NotPermitted("a viewer"), 403, "forbidden"),
     (WorkflowError("flow.yaml", ["no agents"]), 422, "unusable"),
     (ChatRequestError("messages: missing"), 400, "bad_input"),
     (RequestTooLarge("5 MB"), 413, "request_too_large"), (UnknownPath("/v2"), 404, "not_found"),
     (UpstreamFailure("cannot connect"), 502, "upstream_unreachable"),
     (ReplyRefused("broke the protocol"), 502, "packet_gate"), (ReplyCutOff("cut off"), 502, "max_tokens")],
)  # fmt: skip
def test_the_errors_of_each_surface_answer_by_their_kind(error: GroundstateError, status: int, code: str) -> None:
    assert (http_problem(error).status, http_problem(error).code) == (status, code)


def test_exit_codes_did_not_move_with_the_new_kinds() -> None:
    """The kinds added for the HTTP table keep each error's exit code as it was."""
    assert exit_code(UnknownRun("x")) == 2 and exit_code(NotFoundError("x")) == 2
    assert exit_code(DecisionConflict("x")) == 1 and exit_code(AccountConflict("x")) == 1
    assert exit_code(NotAuthenticated("x")) == 2 and exit_code(UpstreamFailure("x")) == 1


def test_the_gateway_answers_in_openai_shape_with_the_tables_status() -> None:
    assert problem_body(RequestTooLarge("too big")) == (413, {"error": {
        "message": "too big", "type": "invalid_request_error", "code": "request_too_large", "param": None}})
    assert problem_body(UpstreamFailure("down"))[1]["error"]["type"] == "upstream_error"
    assert problem_body(ReplyRefused("cut"))[1]["error"]["type"] == "policy_violation"


ERROR_STATUS_LITERALS = re.compile(
    r"HTTPException\(|status_code=[45]\d\d|\"status\":\s*[45]\d\d|send_json\(send,\s*[45]\d\d|problem\s*=\s*\([45]"
)


def test_no_error_status_is_typed_outside_the_table() -> None:
    """Statuses of errors live in ``errors.HTTP_STATUSES``; a handler that writes ``HTTPException(409, ...)`` or
    ``status_code=403`` again fails here, naming the file and line."""
    found = [f"{path.relative_to(SOURCE)}:{number}: {line.strip()}"
             for path in sorted(SOURCE.rglob("*.py")) if path.name != "errors.py"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if ERROR_STATUS_LITERALS.search(line)]  # fmt: skip
    assert found == []
