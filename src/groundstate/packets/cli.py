"""``groundstate packets``: the control packet's schema, validation of a recorded output, the streaming gate."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import typer

from ..errors import ConfigurationError
from .gate import ACCEPTED, PacketGate
from .models import json_schema
from .parse import Limits, parse_output
from .updates import UpdateValidator

app = typer.Typer(help="Control packets (v1.2.0): schema, validation, the streaming gate.", no_args_is_help=True)

_ALLOW = typer.Option(None, "--allow", help="A predicate the model may assert (repeatable); default: model_writable().")


ValidatorFactory = Callable[[list[str] | None], UpdateValidator]
_validators: list[ValidatorFactory] = []


def use_validators(factory: ValidatorFactory) -> None:
    """Where updates are checked: the ``groundstate`` command hands in the kernel's schemas (the kernel sits above
    this package, so this package never imports it)."""
    _validators[:] = [factory]


def _validator(allow: list[str] | None) -> UpdateValidator:
    if not _validators:
        raise ConfigurationError("no update validator: groundstate.cli installs the kernel's with use_validators()")
    return _validators[0](allow or None)


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        typer.echo(f"error: cannot read {path}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None


@app.command()
def schema(
    max_items: int | None = typer.Option(None, "--max-items", min=0, help="Bound the lists (for small models)."),
    max_surface: int | None = typer.Option(None, "--max-surface", min=1, help="Bound surface_response's length."),
) -> None:
    """Print the envelope's JSON Schema (use it for constrained decoding)."""
    typer.echo(json.dumps(json_schema(max_items, max_surface), indent=2))


@app.command()
def validate(
    file: Path = typer.Argument(..., help="A complete model output."),
    allow: list[str] | None = _ALLOW,
    max_surface: int = typer.Option(50_000, help="Characters of surface text kept."),
    max_updates: int = typer.Option(2000, help="mangle_updates accepted per packet."),
    max_update_chars: int = typer.Option(1000, help="Characters per update."),
) -> None:
    """Validate a model output; exit 0 if the packet is usable (maybe degraded), 1 if rejected."""
    limits = Limits(max_surface, max_updates, max_update_chars)
    validator = _validator(allow)
    validator.max_updates, validator.max_update_chars = max_updates, max_update_chars
    result = parse_output(_read(file), validator, limits)
    typer.echo(json.dumps(result.to_json(), ensure_ascii=False))
    raise typer.Exit(0 if result.ok else 1)


@app.command()
def gate(
    file: Path = typer.Argument(..., help="A model output, fed to the gate in chunks."),
    chunk_size: int = typer.Option(16, "--chunk-size", min=1, help="Characters per chunk."),
    prefix_bytes: int = typer.Option(4096, "--prefix-bytes", min=1, help="Where the control packet must start."),
    allow: list[str] | None = _ALLOW,
) -> None:
    """Stream a model output through the gate; exit 0 accepted, 1 aborted."""
    text = _read(file)
    packet_gate = PacketGate(_validator(allow), prefix_bytes=prefix_bytes)
    for start in range(0, len(text), chunk_size):
        packet_gate.feed(text[start : start + chunk_size])
    result = packet_gate.close()
    typer.echo(json.dumps(result.to_json(), ensure_ascii=False))
    raise typer.Exit(0 if result.decision == ACCEPTED else 1)
