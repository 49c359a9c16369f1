"""``groundstate mcp``: the guard in front of your MCP servers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from ..config import load_config
from ..errors import GroundstateError, exit_code

app = typer.Typer(help="MCP: one policy over every tool call of the agents you already run.", no_args_is_help=True)


@app.command()
def serve(
    config: Path | None = typer.Option(
        None, "--config", help="The project configuration (default: $GROUNDSTATE_CONFIG or ./groundstate.toml)."
    ),
) -> None:
    """Serve MCP on stdio in front of the configuration's [mcp.servers]; every tools/call is decided by the policy
    (mcp.mg and [mcp] policy files). Point Claude Desktop, Cursor or an SDK client at this command."""
    from .server import serve_stdio

    try:
        settings = load_config(config).config
        if not settings.mcp.servers:
            raise typer.BadParameter("the configuration names no [mcp.servers.NAME]; the guard has nothing to front")
        asyncio.run(serve_stdio(settings.mcp))
    except GroundstateError as exc:
        typer.echo(f"error: {exc}", err=True)  # stdout is the protocol's channel: messages go to stderr
        raise typer.Exit(exit_code(exc)) from None
