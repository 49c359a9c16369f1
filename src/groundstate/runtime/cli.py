"""``groundstate run`` and ``groundstate runs``: start, watch, decide, resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from .. import long_lived
from ..config import CONFIG_OPTION, DB_OPTION, EXECUTOR_OPTION
from ..errors import GroundstateError, exit_code
from ..store import ACT, ADMINISTER, NotAuthenticated, NotPermitted, command_line_operator, verify_store
from ..terminal_console import SafeConsole
from ..terminal_text import terminal_safe
from .chain import Verdict
from .configured import configured_runtime
from .display import approval_card, dag_view, usage_line
from .executors import Executor, open_executor
from .home import home
from .pauses import age, pauses_json
from .runner import Runtime
from .state import ABORTED, AWAITING_APPROVAL, COMPLETED, FAILED, SUCCEEDED, RunState
from .store import INTERRUPTED, UNREADABLE, LeaseHeld, StoreCorrupt
from .terminal import Autopilot, TerminalDriver, ask_in_terminal, check_decision_options, say
from .workflow import load_workflow, workflow_of

runs_app = typer.Typer(help="Runs: list, show, decide, repin, resume.", no_args_is_help=True)
console = SafeConsole()  # model and store text shown, never obeyed (terminal_text.py)


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
    say(console, f"error: {error}")  # one line, as the user reads it
    return exit_code(error)


def _exit_code(state: RunState) -> int:
    """0 completed with output, 1 completed with nothing produced (every agent skipped) or failed or aborted, 3
    paused."""
    if state.status == COMPLETED:
        return 0 if _produced(state) else 1
    return 3 if state.status == AWAITING_APPROVAL else 1


def _produced(state: RunState) -> bool:
    return any(node.status == SUCCEEDED for node in state.nodes.values())


def _drive(
    runtime: Runtime,
    run_id: str,
    decide: str | None,
    instructions: str | None,
    max_decisions: int,
    executor: Executor,
    resume_failed: bool = False,
) -> int:
    """Drive with a live view on the executor; each open pause is answered by --decide or asked on the terminal
    (left for later when stdin is not one)."""
    if executor.remote:
        say(console, f"segments are driven on the {executor.description}")
    try:
        driver = TerminalDriver(runtime, run_id, console, lambda: command_line_operator(runtime.store.url, ACT).actor,
                                executor)  # fmt: skip
        autopilot = Autopilot(decide, instructions, max_decisions) if decide is not None else None
        long_lived.started()  # the command owns its process, and what it built to start lives as long as it does
        state = driver.drive(autopilot, ask_in_terminal(console), resume_failed)
    except (LeaseHeld, NotAuthenticated, NotPermitted) as exc:
        return _failed(exc)
    finally:
        executor.close()
        runtime.close()  # notifications ([notify]) still being delivered
    nothing = state.status == COMPLETED and not _produced(state)
    ended = state.status in (FAILED, ABORTED) and isinstance(state.outcome, str)
    why = f" — {terminal_safe(str(state.outcome), one_line=True)}" if ended else ""  # one line: it cannot forge one
    say(console, f"run {run_id}: {state.status}{why}" + (" — but no agent produced output (every one was skipped)"
                                                          if nothing else ""))  # fmt: skip
    return _exit_code(state)


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
    executor: str | None = EXECUTOR_OPTION,
) -> None:
    """Run a workflow; pauses ask the operator (retry / edit and retry / skip / abort)."""
    check_decision_options(console, decide, instructions)
    try:
        runtime = _runtime(db, concurrency, config)
        load_workflow(workflow, runtime.roles)
        driving = open_executor(runtime, executor)  # before the run exists: a refused executor leaves nothing
        run_id = runtime.create(workflow.read_text(encoding="utf-8"), str(workflow), model)
    except GroundstateError as exc:  # the workflow, the model spec, the store, the executor
        raise typer.Exit(_failed(exc)) from None
    console.print(f"run {run_id} (state in {home()})")
    text = instructions.read_text(encoding="utf-8") if instructions else None
    raise typer.Exit(_drive(runtime, run_id, decide, text, max_decisions, driving))


audit_app = typer.Typer(help="The record nobody can quietly edit: verify the chains of runs' events and of the "
                             "store's ledger and journal rows.", no_args_is_help=True)  # fmt: skip


@audit_app.command("verify")
def audit_verify(
    run_id: str | None = typer.Option(None, "--run", help="One run (default: every run, and the store's chain)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per run, and one for the store."),
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Recompute each run's chain of events and the store's chain of MCP-guard ledger and tool-journal rows (every
    write carries a hash chained to the one before it), check signed heads with the key ``[audit] key_env`` names,
    and name the first event or row that was changed, removed, inserted or reordered outside groundstate; exit 1 if
    any was."""
    try:
        runtime = _runtime(db, config=config)
        store, key, required = runtime.store, runtime.settings.audit.verifying_key(), runtime.settings.audit.sign
        listed = [] if run_id is not None else list(reversed(store.runs()))
        ids = [run_id] if run_id is not None else [row["id"] for row in listed if row["status"] != UNREADABLE]
        verdicts = [store.verify(one, key, required, listing=True) for one in ids]
        verdicts += [Verdict(row["id"], False, 0, 0, "", None, "changed", row["problem"])
                     for row in listed if row["status"] == UNREADABLE]  # fmt: skip
        orphaned = store.orphaned() if run_id is None else []  # events whose run's row was removed
        whole = verify_store(store.engine, key, required) if run_id is None else None
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    for verdict in verdicts:
        if as_json:
            typer.echo(json.dumps({"run": verdict.run_id, "ok": verdict.ok, "events": verdict.chained,
                                   "unchained": verdict.unchained, "head": verdict.head, "seq": verdict.seq,
                                   "how": verdict.how or None, "detail": verdict.detail or None,
                                   "signed": verdict.signed}))  # fmt: skip
        else:
            say(console, str(verdict))
    for gone in orphaned:
        detail = "its events remain, its row in runs was removed"
        if as_json:
            typer.echo(json.dumps({"run": gone, "ok": False, "how": "removed", "detail": detail}))
        else:
            say(console, f"{gone}: the run was removed: {detail}")
    if whole is not None:
        typer.echo(json.dumps(whole.to_json())) if as_json else say(console, str(whole))
    ok = all(verdict.ok for verdict in verdicts) and not orphaned and (whole is None or whole.ok)
    raise typer.Exit(0 if ok else 1)


@runs_app.command("list")
def list_runs(db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION) -> None:
    """Every run, newest first."""
    try:
        rows = _runtime(db, config=config).store.runs()
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    unreadable = [row for row in rows if row["status"] == UNREADABLE]
    for row in rows:
        if row["status"] == UNREADABLE:
            say(console, terminal_safe(f"{row['id']}  unreadable: {row['problem']}", one_line=True))
            continue
        more = f" (+{row['open_pauses'] - 1} more open: groundstate runs pauses {row['id']})" \
            if row["open_pauses"] > 1 else ""  # fmt: skip
        paused = f"  paused at {row['paused_agent']}: {row['pause_reason']}{more}" if row["pause_reason"] else ""
        gone = f" — its driver is gone; resume with: groundstate runs resume {row['id']}" if row["status"] == \
            INTERRUPTED else ""  # fmt: skip
        say(console, terminal_safe(f"{row['id']}  {row['name']}  {row['status']}{paused}{gone}", one_line=True))
    if unreadable:  # listed with the others; the exit code says the store holds damage
        raise typer.Exit(exit_code(StoreCorrupt(unreadable[0]["problem"])))


@runs_app.command("show")
def show(
    run_id: str,
    db: str | None = DB_OPTION,
    events: bool = typer.Option(False, "--events", help="Print the log."),
    as_json: bool = typer.Option(False, "--json", help="Print the run (status, agents and their outputs) as JSON."),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """A run's DAG, each agent's latest output and its pause; --json the same as one JSON object, --events the log
    as JSON lines."""
    try:
        runtime = _runtime(db, config=config)
        state = runtime.store.state(run_id)
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    if events:
        for event in runtime.store.events(run_id):
            typer.echo(json.dumps(event.to_json(), ensure_ascii=False))
        return
    if as_json:
        typer.echo(json.dumps(_run_json(state), ensure_ascii=False))
        return
    depends = {a.id: a.depends_on for a in workflow_of(state).agents}
    console.print(dag_view(state, depends))
    console.print(usage_line(state), markup=False, highlight=False)
    for agent, node in state.nodes.items():
        if node.output or node.error:
            console.print(f"\n{agent} ({node.status}, attempt {node.attempts}):", markup=False, highlight=False)
            error = f"error: {terminal_safe(str(node.error), one_line=True)}"  # one line: it forged an agent's block
            console.print(_bounded(node.output or error), markup=False, highlight=False)
    for pause in state.pauses:
        console.print(approval_card(pause, state.run_id))


def _bounded(text: str, most: int = 4000) -> str:
    return text if len(text) <= most else text[:most] + f"\n[… {len(text) - most} more characters: --json shows all]"


def _run_json(state: RunState) -> dict[str, object]:
    """The run as ``runs show --json`` prints it: status, model, outcome (a completed run's summary, else why it
    ended), usage, each agent's status, attempts, output and error, and every open pause (as the API's ``pauses``)."""
    return {"run_id": state.run_id, "name": state.name, "status": str(state.status), "model": state.model,
            "outcome": state.outcome, "usage": state.usage,
            "agents": {agent: {"status": str(node.status), "attempts": node.attempts, "output": node.output,
                               "error": node.error} for agent, node in state.nodes.items()},
            "pauses": pauses_json(state)}  # fmt: skip


@runs_app.command("pauses")
def list_pauses(
    run_id: str | None = typer.Argument(None, help="One run's pauses (default: every run's, the inbox)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line, as GET /api/approvals."),
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Every open pause, oldest run first: its id (what `runs decide --pause` names), agent, category, age and
    reason."""
    unreadable: dict[str, StoreCorrupt] = {}
    try:
        runtime = _runtime(db, config=config)
        if run_id:
            states = [runtime.store.state(run_id)]
        else:
            states, unreadable = runtime.store.awaiting()
            states.reverse()
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    for state in states:
        if as_json:
            for pause_row in pauses_json(state):
                typer.echo(json.dumps(pause_row, ensure_ascii=False))
            continue
        for pause in state.pauses:
            line = (f"{state.run_id}  pause {pause.id}  {pause.agent or '-'}  {pause.category}  "
                    f"waiting {age(pause)}  {pause.reason}")  # fmt: skip
            say(console, terminal_safe(line, one_line=True))  # a reason cannot forge a pause line of its own
    if not as_json and not any(state.pauses for state in states):
        say(console, "no open pause" + (f" in run {run_id}" if run_id else ""))
    for damaged in unreadable.values():  # listed apart, after the pauses that could be read; the exit code says it
        typer.echo(terminal_safe(f"error: {damaged}", one_line=True), err=True)
    if unreadable:
        raise typer.Exit(exit_code(next(iter(unreadable.values()))))


@runs_app.command("decide")
def decide_command(
    run_id: str,
    action: str = typer.Argument(..., help="retry, skip or abort"),
    instructions: Path | None = typer.Option(None, "--instructions", help="New instructions for the paused agent."),
    pause: int | None = typer.Option(
        None, "--pause", help="The open pause to decide, by id (`runs pauses` lists them); needed if several."
    ),
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Decide an open pause of a run (then `groundstate runs resume ID`), as the operator whose token is in
    $GROUNDSTATE_TOKEN (else the state directory's console.token, the first admin); recorded in the event log. A
    pause that is no longer open is refused, saying how it was decided."""
    check_decision_options(console, action, instructions)
    text = instructions.read_text(encoding="utf-8") if instructions else None
    try:
        runtime = _runtime(db, config=config)
        who = command_line_operator(runtime.store.url, ACT)
        only = runtime.store.state(run_id).pause if pause is None else None  # the one decide answers unnamed
        state = runtime.decide(run_id, action, text, who.actor, pause=pause)
        answered = pause if pause is not None else only.id if only is not None else None
        runtime.close()  # an abort's notification ([notify]) is delivered before the command exits
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    say(console, f"run {run_id}: {action} recorded for pause {answered}; the run is {state.status}")


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
def resume(
    run_id: str,
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
    executor: str | None = EXECUTOR_OPTION,
) -> None:
    """Continue a run after a decision, a crash or a failure, from its last consistent state (exit 4 if another
    process is driving it). The run keeps its pinned policy, roles, limits and models (`runs repin` changes them)."""
    try:
        runtime = _runtime(db, config=config)
        runtime.store.state(run_id)
        driving = open_executor(runtime, executor)
    except GroundstateError as exc:
        raise typer.Exit(_failed(exc)) from None
    raise typer.Exit(_drive(runtime, run_id, None, None, 0, driving, resume_failed=True))
