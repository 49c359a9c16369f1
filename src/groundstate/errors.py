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
    └── ExecutorError        a program run on a model's behalf could not be run as asked                (exit 1)

Python's own ``TypeError`` for a wrong argument type passed by calling code is a programming mistake, not a
refusal, and stays outside the tree.
"""

from __future__ import annotations


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


EXIT_CODES: tuple[tuple[type[GroundstateError], int], ...] = (
    (ConflictError, 4),  # another process holds the run: try again later
    (ConfigurationError, 2),  # what the user gave cannot be used: fix the file, option or environment
    (StoreError, 2),  # the database given cannot be used as it is (an unknown run, a damaged log)
    (GroundstateError, 1),  # refused: input, policy, limit or executor
)


def exit_code(error: GroundstateError) -> int:
    """The command line's exit code for an error: the first row of EXIT_CODES its kind matches."""
    return next(code for kind, code in EXIT_CODES if isinstance(error, kind))
