"""The root of every error groundstate raises on purpose, and the five kinds of refusal under it.

Each package derives its own errors from one of the kinds below (often together with the built-in class callers
already catch, such as ``ValueError``), so one ``except GroundstateError`` separates "groundstate refused this,
with a message that says what and where" from a bug, and the command line turns the kind into an exit code in one
place (``EXIT_CODES`` below)::

    GroundstateError
    ├── ConfigurationError   a workflow, policy, option, model spec or environment that cannot be used  (exit 2)
    ├── InputError           bytes or text from outside (model, provider, peer, operator) that break a
    │                        format or protocol                                                        (exit 1)
    ├── PolicyError          refused by the policy                                                      (exit 1)
    │   └── LimitError       hostile or oversized input hit a configured bound                          (exit 1)
    ├── StoreError           durable state that cannot be read or written as asked                      (exit 2)
    │   └── ConflictError    another process holds what this needs (a run's lease)                      (exit 4)
    ├── ExecutorError        a program run on a model's behalf could not be run as asked                (exit 1)
    ├── NotFoundError        what was named (a run, a held call, an example, a path) does not exist     (exit 2)
    ├── StateConflict        what was asked no longer fits the current state (a pause already decided,
    │                        the last admin)                                                           (exit 1)
    └── UpstreamFailed       a service this one relays to could not be reached or failed                (exit 1)

Beside them, ``AuthenticationError`` (a ``ConfigurationError``: no or a wrong credential) and ``AccessError`` (a
``PolicyError``: the account may not do this).

The HTTP surfaces — the console and its API, the gateway, the MCP guard's HTTP transport — turn the kind into a
status and a stable ``code`` in one place too (``HTTP_STATUSES``, ``http_problem``); each renders the problem in
the body shape its clients expect (FastAPI's ``detail``, OpenAI's ``error`` object).

Python's own ``TypeError`` for a wrong argument type passed by calling code is a programming mistake, not a
refusal, and stays outside the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus


class GroundstateError(Exception):
    """Something groundstate refused or could not do; the message says what was wrong and where."""


class ConfigurationError(GroundstateError):
    """What the user gave — a file, an option, a model spec, the environment — cannot be used as it is."""


class InputError(GroundstateError):
    """Bytes or text from outside (a model, a provider, a peer, an operator) break the format or protocol."""


class PolicyError(GroundstateError):
    """The policy refused; nothing was changed."""


class LimitError(PolicyError):
    """Hostile or oversized input hit a configured bound (nesting depth, size, count); nothing was changed."""


class StoreError(GroundstateError):
    """Durable state (the event store, cold storage) could not be read or written as asked."""


class ConflictError(StoreError):
    """Another process holds what this needs (a run's lease); trying again later may succeed."""


class ExecutorError(GroundstateError):
    """A program run on a model's behalf (a test, a build, git, model-written code) could not be run as asked."""


class NotFoundError(GroundstateError, LookupError):
    """What was named — a run, a held call, a bundled example, a path of an HTTP surface — does not exist."""


class StateConflict(GroundstateError):
    """What was asked no longer fits the current state (a pause already decided, the last admin's role): read the
    state again, then decide."""


class UpstreamFailed(GroundstateError):
    """A service this one relays to (a model provider, an MCP server) could not be reached, broke off, or sent
    what cannot be passed on."""


class AuthenticationError(ConfigurationError):
    """No credential, or one that names no account."""


class AccessError(PolicyError):
    """The account is known and may not do this."""


EXIT_CODES: tuple[tuple[type[GroundstateError], int], ...] = (
    (ConflictError, 4),  # another process holds the run: try again later
    (NotFoundError, 2),  # what was named does not exist: fix the name
    (ConfigurationError, 2),  # what the user gave cannot be used: fix the file, option or environment
    (StoreError, 2),  # the database given cannot be used as it is (an unknown run, a damaged log)
    (GroundstateError, 1),  # refused: input, policy, limit or executor
)


def exit_code(error: GroundstateError) -> int:
    """The command line's exit code for an error: the first row of EXIT_CODES its kind matches."""
    return next(code for kind, code in EXIT_CODES if isinstance(error, kind))


HTTP_STATUSES: tuple[tuple[type[GroundstateError], int, str], ...] = (
    # kind, status, the stable ``code`` clients match on (the message is for people and may change)
    (NotFoundError, 404, "not_found"),
    (ConflictError, 409, "conflict"),  # another process holds what this needs
    (StateConflict, 409, "state_conflict"),
    (AuthenticationError, 401, "unauthenticated"),
    (AccessError, 403, "forbidden"),
    (LimitError, 413, "too_large"),
    (UpstreamFailed, 502, "upstream_failed"),
    (ConfigurationError, 422, "unusable"),  # a workflow, a model spec, an option the request gave
    (InputError, 400, "bad_input"),
    (PolicyError, 403, "refused"),
    (StoreError, 500, "store_failed"),
    (ExecutorError, 500, "executor_failed"),
    (GroundstateError, 500, "failed"),
)


@dataclass(frozen=True)
class Problem:
    """An error as an HTTP surface answers it: the status, the stable code, the message."""

    status: int
    code: str
    message: str


def status_code_name(status: int) -> str:
    """The stable ``code`` of a status a web framework answered on its own, with no GroundstateError behind it (an
    unknown path, a method a route does not take, a body it cannot parse): the code of HTTP_STATUSES' first row with
    that status, else the status's name (``method_not_allowed``)."""
    found = next((code for _, row_status, code in HTTP_STATUSES if row_status == status), None)
    if found is not None:
        return found
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "failed"


def http_problem(error: GroundstateError) -> Problem:
    """The status and code of an error: the first row of HTTP_STATUSES its kind matches (a class may name a more
    precise ``code`` of its own, e.g. the gateway's ``upstream_unreachable``)."""
    status, code = next((status, code) for kind, status, code in HTTP_STATUSES if isinstance(error, kind))
    return Problem(status, getattr(type(error), "code", code), str(error))
