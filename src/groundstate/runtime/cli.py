"""``groundstate run`` and ``groundstate runs``: start, watch, decide, resume."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.live import Live

from ..config import CONFIG_OPTION, DB_OPTION
from ..errors import GroundstateError, exit_code
from ..store import ACT, ADMINISTER, NotAuthenticated, NotPermitted, command_line_operator
from .configured import configured_runtime
from .display import approval_card, dag_view, usage_line
from .home import home
from .run_events import Event
from .runner import DECISIONS, Runtime
from .state import AWAITING_APPROVAL, COMPLETED, RunState
from .store import LeaseHeld
from .workflow import load_workflow, workflow_of

runs_app = typer.Typer(help="Runs: list, show, decide, repin, resume.", no_args_is_help=True)
console = Console()


def lease_seconds() -> float:
    """How long a driver's claim on a run outlives its last renewal (``GROUNDSTATE_LEASE_SECONDS``, default 30):
    after a crash, another process can take the run over this long after the crashed driver last renewed."""
    raw = os.environ.get("GROUNDSTATE_LEASE_SECONDS", "30")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.5 <= value <= 3600:
        raise typer.BadParameter(f"GROUNDSTATE_LEASE_SECONDS={raw!r}: give a number of seconds from 0.5 to 3600")
    return value


def _runtime(db: str | None, concurrency: int = 4, config: Path | None = None) -> Runtime:
    """The runtime of a command: the configuration's store (``--db`` first), policy, models and limits."""
    return configured_runtime(db, config, concurrency=concurrency, lease_seconds=lease_seconds())


def _failed(error: GroundstateError) -> int:
    """Print the refusal where the run's live view prints, and give its kind's exit code (errors.EXIT_CODES)."""
    console.print(f"error: {error}", markup=False)
    return exit_code(error)


def _exit_code(state: RunState) -> int:
    return 0 if state.status == COMPLETED else 3 if state.status == AWAITING_APPROVAL else 1


def _drive(
    runtime: Runtime,
    run_id: str,
    decide: str | None,
    instructions: str | None,
    max_decisions: int,
    resume_failed: bool = False,
) -> int:
    """Drive with a live view; at each pause ask the operator (or apply --decide)."""
    try:
        return _drive_live(runtime, run_id, decide, instructions, max_decisions, resume_failed)
    except (LeaseHeld, NotAuthenticated, NotPermitted) as exc:
        return _failed(exc)


def _drive_live(
    runtime: Runtime, run_id: str, decide: str | None, instructions: str | None, max_decisions: int,
    resume_failed: bool,
) -> int:  # fmt: skip
    state = runtime.store.state(run_id)
    depends = {a.id: a.depends_on for a in workflow_of(state).agents}
    decisions = 0
    with Live(dag_view(state, depends), console=console, refresh_per_second=4, transient=False) as live:

        def refresh(_: Event) -> None:
            live.update(dag_view(runtime.store.state(run_id), depends))

        runtime.listeners.append(refresh)
        while True:
            state = asyncio.run(runtime.drive(run_id, resume_failed=resume_failed))
            resume_failed = False
            live.update(dag_view(state, depends))
            if state.status != AWAITING_APPROVAL:
                break
            card = approval_card(state)
            if card is not None:
                console.print(card)
            if decide is not None and decisions < max_decisions:
                choice, new = decide, instructions
            elif decide is None and sys.stdin.isatty():
                choice, new = _ask(state)
            else:
                console.print(f"paused; decide with: groundstate runs decide {run_id} retry|skip|abort")
                break
            decisions += 1
            runtime.decide(run_id, choice, new, command_line_operator(runtime.store.url, ACT).actor)
            if choice == "abort":
                state = runtime.store.state(run_id)
                break
    console.print(f"run {run_id}: {state.status}")
    return _exit_code(state)


def _ask(state: RunState) -> tuple[str, str | None]:
    from rich.prompt import Prompt

    choice = Prompt.ask("decision", choices=["retry", "edit", "skip", "abort"], default="retry", console=console)
    if choice != "edit":
        return choice, None
    node = state.nodes.get(state.pause.agent or "") if state.pause else None
    current = node.instructions if node and node.instructions else ""
    return "retry", Prompt.ask("new instructions", default=current or None, console=console)


def run(
    workflow: Path = typer.Argument(..., help="A workflow YAML file."),
    model: str | None = typer.Option(
        None,
        "--model",
        help="local, local:PATH.gguf or API:MODEL@URL (default: the configuration's models.default, else local).",
    ),
    db: str | None = DB_OPTION,
    decide: str | None = typer.Option(None, "--decide", help="Decide every pause without asking: retry|skip|abort."),
    instructions: Path | None = typer.Option(None, "--instructions", help="New instructions for --decide retry."),
    max_decisions: int = typer.Option(3, "--max-decisions", min=1, help="How many pauses --decide may handle."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Agents that may run at the same time."),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Run a workflow; pauses ask the operator (retry / edit and retry / skip / abort)."""
    if decide is not None and decide not in DECISIONS:
        console.print(f"error: --decide must be one of {', '.join(DECISIONS)}")
        raise typer.Exit(2)
    try:
        runtime = _runtime(db, concurrency, config)
        load_workflow(workflow, runtime.roles)
        run_id = runtime.create(workflow.read_text(encoding="utf-8"), str(workflow), model)
    except GroundstateError as exc:  # the workflow, the model spec, the store
        raise typer.Exit(_failed(exc)) from None
    console.print(f"run {run_id} (state in {home()})")
    text = instructions.read_text(encoding="utf-8") if instructions else None
    raise typer.Exit(_drive(runtime, run_id, decide, text, max_decisions))


@runs_app.command("list")
def list_runs(db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION) -> None:
    """Every run, newest first."""
    try:
        rows = _runtime(db, config=config).store.runs()
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    for row in rows:
        paused = f"  paused at {row['paused_agent']}: {row['pause_reason']}" if row["pause_reason"] else ""
        console.print(f"{row['id']}  {row['name']}  {row['status']}{paused}", markup=False, highlight=False)


@runs_app.command("show")
def show(
    run_id: str,
    db: str | None = DB_OPTION,
    events: bool = typer.Option(False, "--events", help="Print the log."),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """A run's DAG, its pause, and (with --events) its event log as JSON lines."""
    try:
        runtime = _runtime(db, config=config)
        state = runtime.store.state(run_id)
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    if events:
        for event in runtime.store.events(run_id):
            typer.echo(json.dumps(event.to_json(), ensure_ascii=False))
        return
    depends = {a.id: a.depends_on for a in workflow_of(state).agents}
    console.print(dag_view(state, depends))
    console.print(usage_line(state), markup=False, highlight=False)
    card = approval_card(state)
    if card is not None:
        console.print(card)


@runs_app.command("decide")
def decide_command(
    run_id: str,
    action: str = typer.Argument(..., help="retry, skip or abort"),
    instructions: Path | None = typer.Option(None, "--instructions", help="New instructions for the paused agent."),
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Decide a paused run (then `groundstate runs resume ID`), as the operator whose token is in
    $GROUNDSTATE_TOKEN (else the state directory's console.token, the first admin); recorded in the event log."""
    text = instructions.read_text(encoding="utf-8") if instructions else None
    try:
        runtime = _runtime(db, config=config)
        who = command_line_operator(runtime.store.url, ACT)
        state = runtime.decide(run_id, action, text, who.actor)
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    console.print(f"run {run_id}: {action} recorded; the run is {state.status}")


@runs_app.command("repin")
def repin(
    run_id: str,
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Pin a paused, pending or failed run to the configuration's current policy (guard files, patterns, roles,
    limits); recorded as a PolicyRepinned event with the previous digest and the admin who re-pinned (the token in
    $GROUNDSTATE_TOKEN, else console.token). Then `groundstate runs resume ID`."""
    try:
        runtime = _runtime(db, config=config)
        who = command_line_operator(runtime.store.url, ADMINISTER)
        before = (runtime.store.state(run_id).policy or {}).get("digest") or "none"
        state = runtime.repin(run_id, who.actor)
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    after = (state.policy or {}).get("digest")
    console.print(f"run {run_id} re-pinned: {before} -> {after}; the run is {state.status}", markup=False,
                  highlight=False)  # fmt: skip


@runs_app.command("resume")
def resume(run_id: str, db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION) -> None:
    """Continue a run after a decision, a crash or a failure, from its last consistent state (exit 4 if another
    process is driving it). The run keeps its pinned policy, roles, limits and models (`runs repin` changes them)."""
    try:
        runtime = _runtime(db, config=config)
        runtime.store.state(run_id)
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    raise typer.Exit(_drive(runtime, run_id, None, None, 0, resume_failed=True))
