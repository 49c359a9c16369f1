"""``groundstate mcp``: the guard in front of your MCP servers."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import typer

from .. import tracing
from ..config import CONFIG_OPTION, DB_OPTION, default_db_url, home, load_config
from ..errors import GroundstateError, exit_code
from ..providers import adopting_orphans, first_error
from ..store import ACT, Operators, command_line_operator
from .ledger import Ledger

app = typer.Typer(help="MCP: one policy over every tool call of the agents you already run.", no_args_is_help=True)


_HTTP = typer.Option(None, "--http", help="HOST:PORT: serve streamable HTTP at /mcp (an operator account's "
                     "token as bearer) instead of stdio.")  # fmt: skip
_HISTORY = typer.Option(None, "--history", help="NAME: every guard started with this name shares what its calls "
                        "returned (provenance), through the store — for a client that starts a guard per call "
                        "through a launcher, or in a container (stdio only).")  # fmt: skip
HISTORY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # a name, not a path or a key of another kind


@app.command()
def serve(
    config: Path | None = CONFIG_OPTION,
    http: str | None = _HTTP,
    history: str | None = _HISTORY,
) -> None:
    """Serve MCP on stdio in front of the configuration's [mcp.servers]; every tools/call is decided by the policy
    (mcp.mg and [mcp] policy files). Point Claude Desktop, Cursor or an SDK client at this command."""
    from .server import serve_http, serve_stdio

    try:
        settings = load_config(config).config
        tracing.configure(settings.tracing.endpoint, settings.tracing.service_name)
        if not settings.mcp.servers and not settings.tools.modules:
            raise typer.BadParameter("the configuration names no [mcp.servers.NAME] and no [tools] modules; the guard "
                                     "has nothing to front")  # fmt: skip
        store = settings.store.url or default_db_url(home())
        if history is not None and not HISTORY_NAME.fullmatch(history):
            raise typer.BadParameter(f"--history {history[:100]!r}: a name of 1 to 100 letters, digits, '.', '_' "
                                     "or '-', starting with a letter or digit")  # fmt: skip
        if history is not None and http is not None:
            raise typer.BadParameter("--history names a stdio guard's history; over HTTP each operator account's "
                                     "sessions share theirs already")  # fmt: skip
        if http is None:
            with adopting_orphans():  # what a server leaves behind (a daemon) is stopped with the guard
                asyncio.run(serve_stdio(settings, store, history))
        else:
            host, _, port = http.rpartition(":")
            if not host or not port.isdigit():
                raise typer.BadParameter("--http must be HOST:PORT")
            operators = Operators.of_home(store)
            with adopting_orphans():
                asyncio.run(serve_http(settings, store, host, int(port), operators))
    except* GroundstateError as group:  # the SDK's task groups wrap our refusals in exception groups
        exc = first_error(group)
        assert isinstance(exc, GroundstateError)  # except* caught only these
        typer.echo(f"error: {exc}", err=True)  # stdout is the protocol's channel: messages go to stderr
        raise typer.Exit(exit_code(exc)) from None


approvals_app = typer.Typer(help="Calls the MCP guard holds for an operator: list, approve, deny.",
                            no_args_is_help=True)  # fmt: skip


@approvals_app.command("list")
def list_calls(
    every: bool = typer.Option(False, "--all", help="Every decision, not only the held calls."),
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
) -> None:
    """The calls waiting for an operator (with --all: every decision), newest first, one JSON object per line."""
    try:
        settings = load_config(config).config
        ledger = Ledger(db or settings.store.url or default_db_url(home()), settings.audit.key())
        entries = ledger.entries() if every else ledger.waiting()  # a call nobody waits for is never offered
    except GroundstateError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exit_code(exc)) from None
    for entry in entries:
        typer.echo(json.dumps(entry.to_json(), ensure_ascii=False))


def _decide(entry_id: int, approve: bool, digest: str | None, db: str | None, config: Path | None) -> None:
    try:
        settings = load_config(config).config
        store = db or settings.store.url or default_db_url(home())
        who = command_line_operator(store, ACT)
        ledger = Ledger(store, settings.audit.key())
        entry = ledger.decide(entry_id, approve, who.name, digest, settings.access.self_approval)
    except GroundstateError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exit_code(exc)) from None
    typer.echo(f"call {entry.id} ({entry.server}/{entry.tool}, {entry.digest}): {entry.status} by {entry.operator}")


_DIGEST = typer.Option(None, "--digest", help="The call's digest, as listed: refused if the call is another one.")


@approvals_app.command("approve")
def approve(
    entry_id: int, digest: str | None = _DIGEST, db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION
) -> None:
    """Let a held call through (once; refused if it expired or was decided), as the operator whose token is in
    $GROUNDSTATE_TOKEN (else the state directory's console.token)."""
    _decide(entry_id, True, digest, db, config)


@approvals_app.command("deny")
def deny(
    entry_id: int, digest: str | None = _DIGEST, db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION
) -> None:
    """Refuse a held call (as the operator whose token is in $GROUNDSTATE_TOKEN, else console.token)."""
    _decide(entry_id, False, digest, db, config)
