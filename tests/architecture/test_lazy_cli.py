"""The command line starts at once: the top level imports no command group, and each group imports only what it
uses — ``groundstate sigil``/``wire``, ``logic``, ``packets`` and ``providers`` never load FastAPI, SQLAlchemy,
numpy or llama.cpp, nor typer's layer (checked in a fresh interpreter's ``sys.modules``). Start times are measured
in bench/cli."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, cast

import click
import pytest
import typer

from groundstate.cli import COMMANDS, app

HEAVY = ("fastapi", "sqlalchemy", "numpy", "llama_cpp", "uvicorn", "starlette", "httpx", "aiohttp", "mcp",
         "prometheus_client",
         "groundstate.runtime",
         "groundstate.console")  # fmt: skip


def loaded_by(*argv: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``groundstate ARGV``."""
    probe = ("import sys, json\nfrom groundstate.cli import main\n"
             "sys.argv = ['groundstate', *json.loads(sys.argv[1])]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe, json.dumps(list(argv))], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [("--help",), ("sigil", "--help"), ("wire", "--help"), ("logic", "--help"),
                                  ("packets", "--help"), ("providers", "--help")])  # fmt: skip
def test_light_commands_import_nothing_heavy(argv: tuple[str, ...]) -> None:
    heavy = sorted(m for m in loaded_by(*argv) if m.split(".")[0] in HEAVY or m in HEAVY)
    assert heavy == [], f"groundstate {' '.join(argv)} imported {heavy}"


@pytest.mark.parametrize("argv", [("sigil", "--help"), ("logic", "--help"), ("packets", "--help"),
                                  ("providers", "--help")])  # fmt: skip
def test_light_groups_start_without_the_typer_layer(argv: tuple[str, ...]) -> None:
    """The light groups are click groups run straight from main: typer (and the pydantic adapters it builds for every
    parameter) is never imported for them."""
    layer = sorted(m for m in loaded_by(*argv) if m.split(".")[0] in ("typer", "pydantic", "rich"))
    assert layer == [], f"groundstate {' '.join(argv)} imported {layer}"


def test_the_top_level_help_imports_no_command_group() -> None:
    groups = sorted(m for m in loaded_by("--help") if m.endswith(".cli") and m != "groundstate.cli")
    assert groups == []


def test_the_top_level_lists_each_groups_own_help() -> None:
    """The one-line help the top level shows (without importing the groups) is the group's own."""
    context = click.Context(cast(Any, typer.main.get_command(app)))
    for name, entry in COMMANDS.items():
        command = context.command.get_command(context, name)  # type: ignore[attr-defined]
        assert command is not None and command.name == name
        assert (command.help or "").split("\n\n")[0].strip() == entry.help, name
