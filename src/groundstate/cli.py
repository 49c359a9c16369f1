"""The ``groundstate`` command: each package contributes its own command group; errors become exit codes here.

The light groups (``wire``/``sigil``, ``logic``, ``packets``, ``providers``) are written with click and run straight
from ``main`` without importing typer, so they start at once; the others are typer apps under the top-level typer
group (``app``, built on first use), which imports a group's module only when that group runs.

Every error groundstate raises on purpose derives from ``GroundstateError`` (``groundstate.errors`` draws the
tree); ``main`` prints its message and exits with the code ``errors.EXIT_CODES`` gives its kind — the one table
(commands that print an error themselves use ``errors.exit_code`` too). Commands that end with a verdict rather
than an error (a rejected packet: 1, a paused run: 3) return their code themselves.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import __version__
from .errors import GroundstateError, exit_code
from .terminal_text import guard_standard_streams


@dataclass(frozen=True)
class Lazy:
    """A subcommand whose module is imported only when it runs (or its own help is asked for): a command group (a
    ``typer.Typer``, or a ``click.Group`` for the groups that must start at once) or a single command (a function),
    with the one line the top-level help shows for it."""

    module: str
    attribute: str
    help: str
    setup: Callable[[], None] | None = None  # run once the module is imported
    hidden: bool = False  # another name for a command the help already lists

    def target(self) -> Any:
        """The module's command object (its setup run): a Typer app, a click group or a function."""
        found: Any = getattr(importlib.import_module(self.module), self.attribute)
        if self.setup is not None:
            self.setup()
        return found

    def load(self, name: str) -> Any:
        """The click command, built from the module's Typer app or function (a click group is returned as it is)."""
        import typer

        target = self.target()
        if not isinstance(target, typer.Typer) and hasattr(target, "list_commands"):  # a light group: plain click
            if target.name == name:
                return target
            alias = copy.copy(target)  # ``sigil`` is ``wire`` under another name
            alias.name = name
            return alias
        holder = typer.Typer(add_completion=False)  # as if registered on the top level: the same command it was
        if isinstance(target, typer.Typer):
            holder.add_typer(target, name=name)
        else:
            holder.command(name=name)(target)
            holder.callback()(_nothing)  # keeps a single command a subcommand
        group: Any = typer.main.get_command(holder)
        return _plain(group.commands[name])


def _plain(command: Any) -> Any:
    """Help and usage errors in click's plain format for the command and every subcommand: rich's formatting costs
    a tenth of a second on each start (bench/cli)."""
    command.rich_markup_mode = None
    for sub in getattr(command, "commands", {}).values():
        _plain(sub)
    return command


def _nothing() -> None:
    """(The holder group's callback.)"""


def _kernel_validators() -> None:
    """``groundstate packets`` checks updates against the kernel's shipped schemas (the packets package cannot
    import the kernel, a layer above it: the command line hands it over)."""
    from .packets.cli import use_validators

    def validator(allow: list[str] | None) -> Any:
        from .kernel import load_program, update_validator

        return update_validator(load_program([]).analyze(), allow)

    use_validators(validator)


def _config_checks() -> None:
    """Give `config check` what the commands above the configuration would refuse (config.cli.use_checks)."""
    from .config.cli import use_checks

    use_checks(_deep_config_problems)


def _deep_config_problems(loaded: Any) -> list[str]:
    """Each thing `run`, `serve`, `mcp serve` or `gateway` would refuse in this configuration, ``FILE:LINE: key:
    why`` (a rule file's own errors name the rule file's line)."""
    from .errors import GroundstateError
    from .guard import McpPolicy, ReplyPolicy
    from .kernel import load_program
    from .runtime import check_model_spec, guard_rules, load_patterns

    settings, problems = loaded.config, []

    def at(key: tuple[str, ...], why: str) -> None:
        problems.append(f"{loaded.origin(key)}: {'.'.join(key)}: {why}")

    models = settings.models
    specs: list[tuple[tuple[str, ...], str]] = [(("models", "default"), models.default)] if models.default else []
    specs += [(("models", "roles", name), spec) for name, spec in models.roles.items()]
    specs += [(("models", "agents", name), spec) for name, spec in models.agents.items()]
    specs += [(("models", "fallback"), spec) for spec in models.fallback]
    for key, spec in specs:
        try:
            check_model_spec(spec)
        except GroundstateError as exc:
            at(key, str(exc))
    checks: list[tuple[tuple[str, ...], Callable[[], object]]] = [
        (("policy", "disable_guards"), lambda: guard_rules(settings.policy.guards, settings.policy.disable_guards)),
        (("policy", "disable_patterns"), lambda: load_patterns(*settings.policy.patterns,
                                                               disabled=settings.policy.disable_patterns)),
        (("policy", "kernel"), lambda: load_program(settings.policy.kernel).analyze()),
        (("policy", "shadow"), lambda: guard_rules(settings.policy.shadow, settings.policy.disable_guards)
                                       if settings.policy.shadow else None),
        (("audit", "sign"), lambda: settings.audit.key()),
        (("mcp", "policy"), lambda: McpPolicy(list(settings.mcp.policy))),
        (("mcp", "shadow"), lambda: McpPolicy(list(settings.mcp.shadow))),
        (("gateway", "rules"), lambda: ReplyPolicy(list(settings.gateway.rules)) if settings.gateway.rules else None),
    ]  # fmt: skip
    for place, build in checks:
        try:
            build()
        except GroundstateError as exc:  # a rule file's own error names its file and line after the key's
            at(place, str(exc).removeprefix(f"{place[0]}.{place[1]}: "))
    return problems


# fmt: off
COMMANDS: dict[str, Lazy] = {
    "logic": Lazy("groundstate.logic.cli", "app", "The Mangle-dialect logic engine."),
    "wire": Lazy("groundstate.wire.cli", "app", "SIGIL: the binary wire format for token streams."),
    "sigil": Lazy("groundstate.wire.cli", "app", "SIGIL: the binary wire format for token streams.", hidden=True),
    "providers": Lazy("groundstate.providers.cli", "app", "Provider streams: parse and inspect."),
    "packets": Lazy("groundstate.packets.cli", "app", "Control packets (v1.2.0): schema, validation, the streaming "
                    "gate.", setup=_kernel_validators),
    "kernel": Lazy("groundstate.kernel.cli", "app", "The agent kernel: step, lint, repl."),
    "runs": Lazy("groundstate.runtime.cli", "runs_app", "Runs: list, show, decide, repin, resume."),
    "audit": Lazy("groundstate.runtime.cli", "audit_app", "The record nobody can quietly edit: verify the chains "
                  "of runs' events and of the store's ledger and journal rows."),
    "config": Lazy("groundstate.config.cli", "app", "The project configuration (groundstate.toml).",
                   setup=_config_checks),
    "mcp": Lazy("groundstate.guard.cli", "app", "MCP: one policy over every tool call of the agents you already run."),
    "policy": Lazy("groundstate.policies.cli", "app", "Policies: test your rules before they decide."),
    "approvals": Lazy("groundstate.guard.cli", "approvals_app", "Calls the MCP guard holds for an operator: list, "
                      "approve, deny."),
    "operators": Lazy("groundstate.store.cli", "app", "Operator accounts: viewers see, operators decide, admins "
                      "manage accounts and policy."),
    "run": Lazy("groundstate.runtime.cli", "run", "Run a workflow; pauses ask the operator (retry / edit and retry "
                "/ skip / abort)."),
    "serve": Lazy("groundstate.console.cli", "serve", "Serve the operator console and its API; runs it starts or "
                  "unpauses are driven by the executor."),
    "demo": Lazy("groundstate.console.cli", "demo", "Run the bundled workflow (research -> analyze -> writer) on the "
                 "local model with the console beside it."),
    "worker": Lazy("groundstate.runtime.cluster_cli", "worker", "Join this machine to the Ray pool that drives runs."),
    "status": Lazy("groundstate.runtime.cluster_cli", "status", "The pool: leases, queue depth, nodes and their "
                   "drivers."),
    "gateway": Lazy("groundstate.console.cli", "gateway", "An OpenAI-compatible gateway for LLM SDKs: a proxy to a "
                    "provider, or the local model."),
}
# fmt: on


LIGHT = ("logic", "wire", "sigil", "providers", "packets")  # click groups, run by main without typer
# the commands that start MCP servers, themselves or in the runs they drive: what a server leaves behind (a daemon)
# becomes theirs and is stopped when they end (``adopting_orphans``); no other command adopts anything
ADOPTING = (("run",), ("serve",), ("demo",), ("runs", "resume"), ("mcp", "serve"))


def adopts(arguments: list[str]) -> bool:
    """Whether the command line names one of the ``ADOPTING`` commands."""
    words = [argument for argument in arguments if not argument.startswith("-")][:2]
    return any(tuple(words[: len(command)]) == command for command in ADOPTING)


def build_app() -> Any:
    """The top-level typer app: each subcommand's module is imported when that subcommand runs, so ``groundstate
    runs`` never pays for the console; the top-level help is drawn from ``COMMANDS`` without importing any."""
    import typer
    from typer.core import TyperGroup

    class LazyCommands(TyperGroup):
        """The top-level group, its subcommands loaded on demand."""

        def list_commands(self, ctx: Any) -> list[str]:
            """Every subcommand, in the help's order."""
            return list(COMMANDS)

        def get_command(self, ctx: Any, cmd_name: str) -> Any:
            """The subcommand, its module imported now."""
            entry = COMMANDS.get(cmd_name)
            return entry.load(cmd_name) if entry is not None else None

        def format_commands(self, ctx: Any, formatter: Any) -> None:
            """The commands and their one-line help, without importing any of them."""
            with formatter.section("Commands"):
                formatter.write_dl([(name, entry.help) for name, entry in COMMANDS.items() if not entry.hidden])

    top = typer.Typer(
        cls=LazyCommands,
        help="groundstate: a deterministic integrity layer for LLM agents.",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
    )

    def version(value: bool) -> None:
        if value:
            typer.echo(f"groundstate {__version__}")
            raise typer.Exit()

    @top.callback()
    def callback(
        version: bool = typer.Option(False, "--version", callback=version, is_eager=True, help="Print the version."),
    ) -> None:
        """groundstate: a deterministic integrity layer for LLM agents."""

    return top


def __getattr__(name: str) -> Any:
    """``app``: the top-level typer app, built when first asked for (``main`` runs the light groups without it)."""
    if name == "app":
        built = globals()["app"] = build_app()
        return built
    raise AttributeError(name)


def main() -> None:
    """The console script: run the command; a GroundstateError is its message on stderr and its kind's exit code."""
    guard_standard_streams()  # what any command prints is shown, never obeyed (terminal_text.py)
    try:
        arguments = sys.argv[1:]
        if arguments and arguments[0] in LIGHT:  # a click group: run it as it is, typer never imported
            group = COMMANDS[arguments[0]].target()
            group.main(args=arguments[1:], prog_name=f"groundstate {arguments[0]}")
        else:
            from .providers import adopting_orphans, stopped_with_us, unreadable_by_peers

            unreadable_by_peers()  # the servers and tools it starts run as the same user: not into its /proc
            adopting = adopting_orphans() if adopts(arguments) else contextlib.nullcontext()
            with stopped_with_us(), adopting:  # a SIGTERM stops the MCP servers a command started, then the command
                __getattr__("app")()
    except GroundstateError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(exit_code(error))
