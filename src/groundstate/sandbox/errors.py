"""Errors of the sandbox package."""

from __future__ import annotations

from ..errors import ConfigurationError, ExecutorError


class SandboxError(ExecutorError):
    """A program could not be run in the sandbox."""


class SandboxUnavailable(SandboxError, ConfigurationError):
    """No isolation mechanism works on this machine; the message names what to install. Nothing was run."""
