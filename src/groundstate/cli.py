"""The ``groundstate`` command: each package contributes its own command group; errors become exit codes here.

Every error groundstate raises on purpose derives from ``GroundstateError`` (``groundstate.errors`` draws the
tree); ``main`` prints its message and exits with the code ``errors.EXIT_CODES`` gives its kind — the one table
(commands that print an error themselves use ``errors.exit_code`` too). Commands that end with a verdict rather
than an error (a rejected packet: 1, a paused run: 3) return their code themselves.
"""

from __future__ import annotations

import sys

import typer

from . import __version__
from .config.cli import app as config_app
from .console.cli import demo as demo_command
from .console.cli import gateway as gateway_command
from .console.cli import serve as serve_command
from .errors import GroundstateError, exit_code
from .guard.cli import app as mcp_app
from .guard.cli import approvals_app
from .kernel.cli import app as kernel_app
from .logic.cli import app as logic_app
from .packets import UpdateValidator
from .packets.cli import app as packets_app
from .packets.cli import use_validators
from .providers.cli import app as providers_app
from .runtime.cli import run as run_command
from .runtime.cli import runs_app
from .store.cli import app as operators_app
from .wire.cli import app as wire_app

app = typer.Typer(
    help="groundstate: a deterministic integrity layer for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(logic_app, name="logic")
app.add_typer(wire_app, name="wire")
app.add_typer(providers_app, name="providers")
app.add_typer(packets_app, name="packets")
app.add_typer(kernel_app, name="kernel")
app.add_typer(runs_app, name="runs")
app.add_typer(config_app, name="config")
app.add_typer(mcp_app, name="mcp")
app.add_typer(approvals_app, name="approvals")
app.add_typer(operators_app, name="operators")
app.command(name="run")(run_command)
app.command(name="serve")(serve_command)
app.command(name="demo")(demo_command)
app.command(name="gateway")(gateway_command)


def _kernel_validator(allow: list[str] | None) -> UpdateValidator:
    """``groundstate packets`` checks updates against the kernel's shipped schemas."""
    from .kernel import load_program, update_validator

    return update_validator(load_program([]).analyze(), allow)


use_validators(_kernel_validator)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"groundstate {__version__}")
        raise typer.Exit()


@app.callback()
def callback(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """groundstate: a deterministic integrity layer for LLM agents."""


def main() -> None:
    """The console script: run the command; a GroundstateError is its message on stderr and its kind's exit code."""
    try:
        app()
    except GroundstateError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(exit_code(error))
