"""The error tree (groundstate.errors) and its exit codes, as a user meets them on the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from groundstate.errors import (
    ConfigurationError,
    ConflictError,
    ExecutorError,
    GroundstateError,
    InputError,
    LimitError,
    PolicyError,
    StoreError,
    exit_code,
)
from groundstate.kernel import ContextBudgetError, KernelLimitError, NotAwaitingApproval, PacketRefused
from groundstate.logic import ParseError
from groundstate.providers import UnknownAPI, provider_api
from groundstate.runtime import DecisionError, LeaseHeld, UnknownRun, WorkflowError
from groundstate.sandbox import SandboxUnavailable


@pytest.mark.parametrize(
    ("kind", "code"),
    [(ConflictError, 4), (ConfigurationError, 2), (StoreError, 2), (InputError, 1), (PolicyError, 1),
     (LimitError, 1), (ExecutorError, 1), (GroundstateError, 1)],
)  # fmt: skip
def test_each_kind_has_its_exit_code(kind: type[GroundstateError], code: int) -> None:
    assert exit_code(kind("x")) == code


def test_package_errors_sit_in_their_kind() -> None:
    assert issubclass(LeaseHeld, ConflictError) and exit_code(LeaseHeld("held")) == 4
    assert issubclass(UnknownRun, StoreError) and issubclass(UnknownRun, ConfigurationError)
    assert issubclass(WorkflowError, ConfigurationError) and issubclass(UnknownAPI, ConfigurationError)
    assert issubclass(SandboxUnavailable, ExecutorError) and issubclass(SandboxUnavailable, ConfigurationError)
    assert issubclass(ParseError, InputError) and issubclass(PacketRefused, InputError)
    assert issubclass(DecisionError, InputError) and issubclass(NotAwaitingApproval, InputError)
    assert issubclass(KernelLimitError, LimitError) and issubclass(ContextBudgetError, LimitError)


def test_an_unknown_api_names_the_known_ones() -> None:
    with pytest.raises(UnknownAPI, match="unknown API 'grpc': use one of openai-chat, openai-responses"):
        provider_api("grpc")


def test_the_command_maps_an_error_to_its_kinds_code(tmp_path: Path) -> None:
    """A refusal on the command line is a one-line message and its kind's code, never a traceback."""
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path)}
    command = [sys.executable, "-m", "groundstate", "runs", "decide", "run-nope", "retry"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr  # UnknownRun: a store/configuration error
    assert "there is no run run-nope" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_an_uncaught_refusal_reaches_main_and_its_code() -> None:
    """Commands that do not print errors themselves: ``main`` prints the message and exits with the kind's code."""
    command = [sys.executable, "-m", "groundstate", "gateway", "--upstream", "http://127.0.0.1:9", "--api", "grpc"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: unknown API 'grpc'")
    assert "Traceback" not in done.stderr
