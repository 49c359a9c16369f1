"""The ``groundstate`` command; each package contributes its own sub-command group."""

from __future__ import annotations

import typer

from . import __version__
from .console.cli import demo as demo_command
from .console.cli import serve as serve_command
from .kernel.cli import app as kernel_app
from .logic.cli import app as logic_app
from .packets.cli import app as packets_app
from .providers.cli import app as providers_app
from .runtime.cli import run as run_command
from .runtime.cli import runs_app
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
app.command(name="run")(run_command)
app.command(name="serve")(serve_command)
app.command(name="demo")(demo_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"groundstate {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """groundstate: a deterministic integrity layer for LLM agents."""


@app.command()
def gateway(
    upstream: str = typer.Option(..., "--upstream", help="The provider's base URL, or 'local' for the local model."),
    api: str = typer.Option("openai-chat", "--api", help="openai-chat, openai-responses, anthropic or ollama."),
    listen: str = typer.Option("127.0.0.1:8787", "--listen", help="HOST:PORT to serve on (loopback by default)."),
    publish: str | None = typer.Option(None, "--publish", help="ZMQ endpoint to publish SIGIL frames on."),
) -> None:
    """An HTTP proxy for LLM SDKs: responses pass through unchanged and are published as SIGIL frames."""
    from .providers.gateway import serve

    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        typer.echo("error: --listen must be HOST:PORT", err=True)
        raise typer.Exit(2)
    serve(upstream, api, host, int(port), publish)
