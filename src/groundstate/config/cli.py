"""``groundstate config``: the effective project configuration."""

from __future__ import annotations

from pathlib import Path

import typer

from .effective import render
from .project import load_config

app = typer.Typer(help="The project configuration (groundstate.toml).", no_args_is_help=True)


@app.command()
def show(config: Path | None = typer.Option(None, "--config", help="The configuration file.")) -> None:
    """Print every key with its effective value and where it came from (a file line, or the default)."""
    typer.echo(render(load_config(config)))


@app.command()
def check(config: Path | None = typer.Option(None, "--config", help="The configuration file.")) -> None:
    """Validate the configuration; exit 2 naming every problem (file, line, key)."""
    loaded = load_config(config)
    typer.echo(f"{loaded.path or 'no configuration file'}: ok")
