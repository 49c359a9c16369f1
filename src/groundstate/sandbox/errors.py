"""Errors of the sandbox package."""

from __future__ import annotations

from ..errors import GroundstateError


class SandboxError(GroundstateError):
    """A program could not be run in the sandbox."""


class SandboxUnavailable(SandboxError):
    """No isolation mechanism works on this machine; the message names what to install. Nothing was run."""
