"""``groundstate config``: the effective project configuration, and which working-directory files are trusted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from .effective import render
from .project import FILE_NAME, LoadedConfig, load_config
from .trust import trust as record_trust
from .trust import untrust as forget_trust

app = typer.Typer(help="The project configuration (groundstate.toml).", no_args_is_help=True)

# What `check` asks of the layers above, beyond the schema: each gives the problems it finds, ``FILE:LINE: key: why``
# (installed by the groundstate command when this group loads: this package imports nothing above it).
_CHECKS: list[Callable[[LoadedConfig], list[str]]] = []


def use_checks(check: Callable[[LoadedConfig], list[str]]) -> None:
    """Add a check `config check` runs on a configuration that validates (the guard rules parse, the models are
    specs a backend can be built from, ...)."""
    if check not in _CHECKS:
        _CHECKS.append(check)


@app.command()
def show(config: Path | None = typer.Option(None, "--config", help="The configuration file.")) -> None:
    """Print every key with its effective value and where it came from (a file line, or the default). An
    untrusted ./groundstate.toml is shown too, marked as not used by the other commands."""
    loaded = load_config(config, untrusted=True)
    text = render(loaded)
    if not loaded.trusted:
        text = f"# UNTRUSTED: other commands ignore {loaded.path} until `groundstate config trust`\n" + text
    typer.echo(text)


@app.command()
def check(config: Path | None = typer.Option(None, "--config", help="The configuration file.")) -> None:
    """Validate the configuration as `run`, `serve`, `mcp serve` and `gateway` would use it — the schema, the files
    it names, the rule files (they must parse and analyse with the shipped ones), the names of shipped guards and
    patterns it disables, the model specs; exit 2 naming every problem (file, line, key)."""
    loaded = load_config(config, untrusted=True)
    problems = [problem for deep in _CHECKS for problem in deep(loaded)]
    if problems:
        for problem in problems:
            typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    note = "" if loaded.trusted else " (untrusted: other commands ignore it until `groundstate config trust`)"
    typer.echo(f"{loaded.path or 'no configuration file'}: ok{note}")


@app.command()
def trust(
    path: Path = typer.Argument(Path(FILE_NAME), help="The file to trust (default: ./groundstate.toml)."),
) -> None:
    """Trust a configuration file as it is now (its SHA-256): commands run in its directory will use it. Any change
    to the file withdraws the trust. Read it first: it can import Python modules and change the policy."""
    load_config(path)  # only a file that validates is worth trusting: the same errors as check, exit 2
    digest = record_trust(path)
    typer.echo(f"trusted {path.resolve()} ({digest})")


@app.command()
def untrust(path: Path = typer.Argument(Path(FILE_NAME), help="The file (default: ./groundstate.toml).")) -> None:
    """Withdraw the trust in a configuration file."""
    found = forget_trust(path)
    typer.echo(f"{path.resolve()}: {'no longer trusted' if found else 'was not trusted'}")
