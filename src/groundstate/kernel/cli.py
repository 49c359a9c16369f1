"""``groundstate kernel``: one OODA turn from a packet, the drift linter, an interactive REPL."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import typer

from ..config import LearnedConfig, load_config
from ..logic import LogicError, Program, display_fact, lint_units
from ..packets import parse_output
from .config import KernelConfig
from .executors import EXECUTORS
from .kernel import Kernel, Transaction, default_sources
from .learned import LearnedRuleError, LearnedRules
from .lint import ERROR, lint
from .ooda import PacketRefused, Request, Shards
from .search_backend import configured_search
from .store import VirtualStore

app = typer.Typer(help="The agent kernel: step, lint, repl.", no_args_is_help=True)

SHOWN = (
    "user_intent", "current_ooda_phase", "pending_action", "permission_check_result", "routing_result",
    "execution_result", "chesterton_fence_warning", "awaiting_approval", "delegation", "user_question",
)  # fmt: skip


@app.command()
def step(
    packet: Path = typer.Option(..., "--packet", help="A model output carrying a control packet."),
    workspace: Path = typer.Option(Path("."), "--workspace", help="The directory actions are confined to."),
    request: list[str] | None = typer.Option(None, "--request", help="'TYPE TARGET [PAYLOAD]' (not tool_requests)."),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="groundstate.toml (its [limits] and policy.kernel), or a JSON file with core_limits and shard_profiles.",
    ),
    policy: list[Path] | None = typer.Option(None, "--policy", help="Extra .mg files loaded after the defaults."),
) -> None:
    """Run one full OODA turn and print the packet check, the actions and the resulting facts."""
    try:
        kernel = _configured_kernel(workspace, config, policy or [])
    except (OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    search = (
        configured_search(load_config(config).config.search) if config is None or config.suffix != ".json" else None
    )
    core = kernel.config.core_limits
    store = VirtualStore(kernel.workspace, max_output_chars=core.max_output_chars, search=search,
                         total_memory_mb=core.max_total_memory_mb)  # fmt: skip
    shards = Shards(kernel, store)
    result = parse_output(packet.read_text(encoding="utf-8", errors="replace"), kernel.update_validator())
    out: dict[str, object] = {"packet": result.to_json()}
    if not result.ok:
        typer.echo(json.dumps(out, ensure_ascii=False, indent=2))
        raise typer.Exit(1)
    requests = [_request(r) for r in request] if request else None  # None: the packet's tool_requests
    try:
        reports = shards.step(result, requests)
    except PacketRefused as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    out["actions"] = [r.to_json() for r in reports]
    out["phase"] = kernel.phase()
    out["facts"] = {p: [display_fact(p, f) for f in kernel.engine.facts(p)] for p in SHOWN}
    typer.echo(json.dumps(out, ensure_ascii=False, indent=2))


@app.command(name="lint")
def lint_command(
    policy: list[Path] | None = typer.Option(None, "--policy", help="Extra .mg files loaded after the defaults."),
) -> None:
    """Check policy actions against the router's table and the virtual store; exit 1 on errors."""
    import tempfile

    with tempfile.TemporaryDirectory() as empty:
        try:
            kernel = Kernel(empty, extra_sources=policy or [])
        except LogicError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(1) from None
        findings = lint(kernel, EXECUTORS)
        # the Datalog mistakes in your --policy files, read with the shipped kernel policy they join
        shipped = default_sources()
        datalog = lint_units(Program.load(*shipped, *(policy or [])).units, len(shipped))
    for finding in findings:
        typer.echo(str(finding))
    for mistake in datalog:
        typer.echo(str(mistake))
    code = sorted(str(row[0]) for row in kernel.query("executes_workspace_code(A)"))
    typer.echo(f"actions that run workspace content (sandboxed; a policy may require approval): {' '.join(code)}")
    approved = sorted({str(t) for (t,) in kernel.query("code_needs_approval(T)")})
    if approved:
        typer.echo(f"of those, this policy requires approval for: {' '.join(approved)}")
    errors = sum(1 for f in findings if f.level == ERROR) + sum(1 for m in datalog if m.level == ERROR)
    typer.echo(f"{errors} errors, {len(findings) + len(datalog) - errors} warnings")
    raise typer.Exit(1 if errors else 0)


REPL_HELP = """commands:
  assert FACT        add a base fact, e.g.  assert task_status(/t1, /pending)
  retract FACT       remove a base fact
  query ATOM         facts matching ATOM, e.g.  query next_action(S, T, G, P)
  explain FACT       why a fact holds: the rule and the facts that derived it
  learn RULE         propose a learned rule (checked in isolation, then quarantined)
  phase              the current OODA phase
  help, quit"""


def _request(text: str) -> Request:
    """``--request 'TYPE TARGET [PAYLOAD]'``; the type with or without its leading slash (write_file, /write_file)."""
    kind, *rest = shlex.split(text) or [""]
    return Request("/" + kind.lstrip("/"), rest[0] if rest else "", " ".join(rest[1:]))


def _configured_kernel(workspace: Path, config: Path | None, policy: list[Path]) -> Kernel:
    """A kernel under the configured limits and policy files — from a JSON kernel configuration (limits only), or
    from the project configuration (``--config``, ``$GROUNDSTATE_CONFIG`` or ./groundstate.toml) — with ``policy``
    loaded after them."""
    if config is not None and config.suffix == ".json":
        return Kernel(workspace, config=KernelConfig.load(config), extra_sources=policy)
    project = load_config(config).config
    return Kernel(workspace, config=project.limits, extra_sources=[*project.policy.kernel, *policy])


class _Repl:
    """The REPL's commands: each takes the rest of the line and returns what to print."""

    def __init__(self, kernel: Kernel, learned: LearnedConfig | None = None) -> None:
        self.kernel = kernel
        self.validator = kernel.update_validator(allowlist=[p for p in kernel.engine.predicates])
        self.learned = (LearnedRules(kernel) if learned is None else  # the project's file, counted in runs
                        LearnedRules(kernel, learned.file(), quarantine_evaluations=learned.quarantine_runs,
                                     count="runs"))  # fmt: skip
        self.commands: dict[str, Callable[[str], str]] = {
            "assert": self.assert_, "retract": self.retract, "query": self.query, "learn": self.learn,
            "explain": self.explain, "phase": lambda _: self.kernel.phase(), "help": lambda _: REPL_HELP,
            "": lambda _: REPL_HELP,
        }  # fmt: skip

    def run(self, line: str) -> str:
        command, _, argument = line.partition(" ")
        handler = self.commands.get(command)
        if handler is None:
            return f"unknown command {command!r}; 'help' lists the commands"
        try:
            return handler(argument)
        except (LogicError, LearnedRuleError) as exc:
            return f"error: {exc}"

    def assert_(self, argument: str) -> str:
        return self._change(argument, retract=False)

    def retract(self, argument: str) -> str:
        return self._change(argument, retract=True)

    def _change(self, argument: str, retract: bool) -> str:
        checked = self.validator.check_one(argument)
        if isinstance(checked, str):
            return f"error: {checked}"
        tx = Transaction()
        (tx.retract if retract else tx.assert_)(checked.predicate, checked.fact)
        self.kernel.apply(tx)
        return "ok"

    def query(self, argument: str) -> str:
        predicate = argument.split("(", 1)[0].strip()
        return "\n".join(display_fact(predicate, row) for row in self.kernel.query(argument))

    def learn(self, argument: str) -> str:
        rule = self.learned.propose(argument)
        return f"accepted as learned rule {rule.number}, in quarantine for {rule.remaining} {self.learned.count}"

    def explain(self, argument: str) -> str:
        from .explain import explain

        return explain(self.kernel, argument)


@app.command()
def repl(
    workspace: Path = typer.Option(Path("."), "--workspace", help="The kernel's workspace."),
    policy: list[Path] | None = typer.Option(None, "--policy", help="Extra .mg files loaded after the defaults."),
    config: Path | None = typer.Option(None, "--config", help="groundstate.toml (its [limits] and policy.kernel)."),
) -> None:
    """An interactive kernel: assert, retract, query, explain."""
    try:
        kernel = _configured_kernel(workspace, config, policy or [])
    except (OSError, LogicError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2 if isinstance(exc, OSError) else 1) from None
    project = config is None or config.suffix != ".json"  # the project's learned rules (a JSON config has none)
    session = _Repl(kernel, load_config(config).config.learned if project else None)
    typer.echo("groundstate kernel — 'help' lists the commands")
    while True:
        try:
            line = input("kernel> ").strip()
        except EOFError:
            break
        if line.partition(" ")[0] in ("quit", "exit"):
            break
        output = session.run(line)
        if output:
            typer.echo(output)
