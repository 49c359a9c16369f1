"""``groundstate packets``: the control packet's schema, validation of a recorded output, the streaming gate.

Written with click directly, and the packet models imported by the commands that use them: this group is meant to
start at once (docs/benchmarks.md, "Command-line start")."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from .updates import UpdateValidator


@click.group(name="packets", no_args_is_help=True)
def app() -> None:
    """Control packets (v1.2.0): schema, validation, the streaming gate."""


allow_option = click.option(
    "--allow", "allow", multiple=True, help="A predicate the model may assert (repeatable); default: model_writable()."
)


ValidatorFactory = Callable[[list[str] | None], "UpdateValidator"]
_validators: list[ValidatorFactory] = []


def use_validators(factory: ValidatorFactory) -> None:
    """Where updates are checked: the ``groundstate`` command hands in the kernel's schemas (the kernel sits above
    this package, so this package never imports it)."""
    _validators[:] = [factory]


def _validator(allow: tuple[str, ...]) -> UpdateValidator:
    if not _validators:
        raise ConfigurationError("no update validator: groundstate.cli installs the kernel's with use_validators()")
    return _validators[0](list(allow) or None)


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        click.echo(f"error: cannot read {path}: {exc.strerror}", err=True)
        raise click.exceptions.Exit(2) from None


@app.command()
@click.option("--max-items", type=click.IntRange(min=0), default=None, help="Bound the lists (for small models).")
@click.option("--max-surface", type=click.IntRange(min=1), default=None, help="Bound surface_response's length.")
def schema(max_items: int | None, max_surface: int | None) -> None:
    """Print the envelope's JSON Schema (use it for constrained decoding)."""
    from .models import json_schema

    click.echo(json.dumps(json_schema(max_items, max_surface), indent=2))


@app.command()
@click.argument("file", type=click.Path(path_type=Path))
@allow_option
@click.option("--max-surface", type=int, default=50_000, show_default=True, help="Characters of surface text kept.")
@click.option("--max-updates", type=int, default=2000, show_default=True, help="mangle_updates accepted per packet.")
@click.option("--max-update-chars", type=int, default=1000, show_default=True, help="Characters per update.")
def validate(file: Path, allow: tuple[str, ...], max_surface: int, max_updates: int, max_update_chars: int) -> None:
    """Validate a model output (FILE: a complete one); exit 0 if the packet is usable (maybe degraded), 1 if
    rejected."""
    from .parse import Limits, parse_output

    limits = Limits(max_surface, max_updates, max_update_chars)
    validator = _validator(allow)
    validator.max_updates, validator.max_update_chars = max_updates, max_update_chars
    result = parse_output(_read(file), validator, limits)
    click.echo(json.dumps(result.to_json(), ensure_ascii=False))
    raise click.exceptions.Exit(0 if result.ok else 1)


@app.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--chunk-size", type=click.IntRange(min=1), default=16, show_default=True, help="Characters per chunk.")
@click.option(
    "--prefix-bytes",
    type=click.IntRange(min=1),
    default=4096,
    show_default=True,
    help="Where the control packet must start.",
)
@allow_option
def gate(file: Path, chunk_size: int, prefix_bytes: int, allow: tuple[str, ...]) -> None:
    """Stream a model output (FILE) through the gate in chunks; exit 0 accepted, 1 aborted."""
    from .gate import ACCEPTED, PacketGate

    text = _read(file)
    packet_gate = PacketGate(_validator(allow), prefix_bytes=prefix_bytes)
    for start in range(0, len(text), chunk_size):
        packet_gate.feed(text[start : start + chunk_size])
    result = packet_gate.close()
    click.echo(json.dumps(result.to_json(), ensure_ascii=False))
    raise click.exceptions.Exit(0 if result.decision == ACCEPTED else 1)
