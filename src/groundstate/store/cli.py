"""``groundstate operators``: the operator accounts (admins manage them; the token is the one in
$GROUNDSTATE_TOKEN, else the state directory's console.token, the first admin)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import typer

from ..config import CONFIG_OPTION, DB_OPTION, default_db_url, home, load_config
from ..errors import GroundstateError, exit_code
from .access import ADMINISTER, SEE
from .operators import Operator, Operators, command_line_operator

T = TypeVar("T")
app = typer.Typer(help="Operator accounts: viewers see, operators decide, admins manage accounts and policy.",
                  no_args_is_help=True)  # fmt: skip
_ROLE = typer.Option("operator", "--role", help="viewer, operator or admin.")


def _as(action: str, db: str | None, config: Path | None, change: Callable[[Operators, Operator], T]) -> T:
    """Run ``change`` as the command line's operator, who must be allowed ``action``; refusals exit with their code."""
    try:
        url = db or load_config(config).config.store.url or default_db_url(home())
        who = command_line_operator(url, action)
        return change(Operators(url), who)
    except GroundstateError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exit_code(exc)) from None


@app.command("list")
def list_accounts(db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION) -> None:
    """Every account (name, role, created when and by whom), one JSON object per line; never a token."""
    for account in _as(SEE, db, config, lambda operators, _: operators.list()):
        typer.echo(json.dumps(account.to_json()))


@app.command("add")
def add(name: str, role: str = _ROLE, db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION) -> None:
    """Create an account and print its token (shown this once; the store keeps only its hash)."""
    account, token = _as(ADMINISTER, db, config, lambda operators, who: operators.add(name, role, who))
    typer.echo(f"operator {account.name} ({account.role}) created; token (shown once): {token}")


@app.command("role")
def set_role(name: str, role: str, db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION) -> None:
    """Change an account's role (the last admin stays an admin)."""
    account = _as(ADMINISTER, db, config, lambda operators, who: operators.set_role(name, role, who))
    typer.echo(f"operator {account.name} is now {account.role}")


@app.command("rotate")
def rotate(name: str, db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION) -> None:
    """A new token for an account (your own, or any as an admin); the old token and its sessions stop working."""
    token = _as(SEE, db, config, lambda operators, who: operators.rotate(name, who))
    typer.echo(f"operator {name}: new token (shown once): {token}")


@app.command("remove")
def remove(name: str, db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION) -> None:
    """Remove an account; its token stops working at once (the last admin cannot be removed)."""
    _as(ADMINISTER, db, config, lambda operators, who: operators.remove(name, who))
    typer.echo(f"operator {name} removed")
