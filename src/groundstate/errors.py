"""The root of every error groundstate raises on purpose.

Each package derives its own errors from ``GroundstateError`` (often together with the built-in class callers
already catch, such as ``ValueError``), so one ``except GroundstateError`` separates "groundstate refused this,
with a message that says why" from a bug.
"""

from __future__ import annotations


class GroundstateError(Exception):
    """Something groundstate refused or could not do; the message says what was wrong and where."""


class LimitError(GroundstateError):
    """Hostile or oversized input hit a configured bound (nesting depth, size, count); nothing was changed."""
