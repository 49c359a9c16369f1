"""No dead knobs: every configuration key and every command-line option is exercised by some test (a test names it),
so a knob added without a test that changes it fails the suite. (Which tests show that a knob changes behaviour is
for review; that one exists at all is checked here.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import typer
from typer.core import TyperOption

from groundstate.cli import app
from groundstate.config import ProjectConfig

from ..schema_keys import leaves
from ..test_docs import DOCS, blocks

TESTS = Path(__file__).parents[1]


def corpus() -> str:
    """Every test's text, this file excepted, and the docs' sh blocks (which the suite runs)."""
    tests = [p.read_text(encoding="utf-8") for p in TESTS.rglob("*.py") if p != Path(__file__)]
    docs = [code for page in sorted(DOCS.glob("*.md")) for lang, code in blocks(page.name) if lang == "sh"]
    return "\n".join([*tests, *docs])


def test_every_configuration_key_is_exercised_by_a_test() -> None:
    text = corpus()
    untested = [key for key in leaves(ProjectConfig) if key.rsplit(".", 1)[-1] not in text]
    assert untested == [], f"configuration keys no test names: {untested}"


def options(command: Any, path: str = "groundstate") -> list[tuple[str, list[str]]]:
    """(command path, the option's names) of every option of every command (typer's own click types)."""
    found = []
    if hasattr(command, "list_commands"):  # a group (the top level loads its groups lazily: ask for each)
        context = click.Context(command)
        for name in command.list_commands(context):
            found += options(command.get_command(context, name), f"{path} {name}")
    for param in command.params:
        if isinstance(param, TyperOption) and "--help" not in param.opts:
            found += [(path, [*param.opts, *param.secondary_opts])]
    return found


def used(names: list[str], text: str) -> bool:
    """A long name anywhere, or any name as a quoted command-line word ("-o")."""
    return any(n in text for n in names if n.startswith("--")) or any(f'"{n}"' in text for n in names)


def test_every_command_line_option_is_exercised_by_a_test() -> None:
    text, found = corpus(), options(typer.main.get_command(app))
    assert len(found) > 40  # the walk reached the commands
    untested = [f"{path} {names[0]}" for path, names in found if not used(names, text)]
    assert untested == [], f"options no test uses: {untested}"
