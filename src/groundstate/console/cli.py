"""``groundstate serve`` and ``groundstate demo``."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
import uvicorn

from .. import long_lived, tracing
from ..config import CONFIG_OPTION, DB_OPTION, EXECUTOR_OPTION, default_db_url, load_config
from ..errors import GroundstateError
from ..providers import SHUTDOWN_GRACE_SEC
from ..runtime import (
    AWAITING_APPROVAL,
    COMPLETED,
    FINISHED,
    Autopilot,
    Executor,
    RunState,
    Runtime,
    TerminalDriver,
    check_decision_options,
    configured_runtime,
    home,
    open_executor,
    say,
)
from ..store import ACT, SEE, Operators, command_line_operator
from ..terminal_console import SafeConsole
from .app import EXAMPLES, create_app
from .auth import load_or_create_token

console = SafeConsole()  # model and store text shown, never obeyed (terminal_text.py)
DEMO = EXAMPLES / "market-brief.yaml"
DEMO_DECISIONS = 3  # how many pauses demo --decide answers


def _executor(runtime: Runtime, address: str | None) -> Executor:
    """The executor ``--executor`` (else the configuration) names; a refusal is printed and exits 2."""
    try:
        return open_executor(runtime, address)
    except GroundstateError as exc:
        console.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None


def _server(runtime: Runtime, host: str, port: int, executor: Executor) -> tuple[uvicorn.Server, str]:
    token, created = load_or_create_token(runtime.home)
    if created:  # the token itself only to a person's terminal: a log (a container's, a service's) keeps it forever
        where = runtime.home / "console.token"
        shown = sys.stdout.isatty()
        console.print(f"a console token was created in {where} (mode 0600)" + (":" if shown else
                      f"; it is not printed where output is not a terminal: read it with `cat {where}`"),
                      markup=False, highlight=False, soft_wrap=True)  # fmt: skip
        if shown:
            console.print(token, markup=False, highlight=False, soft_wrap=True)
    # stopped, it gives open requests SHUTDOWN_GRACE_SEC (a browser following a run's event stream held it open)
    # asyncio's event loop even where uvloop is installed (uvicorn would pick it): the loop the runtime is tested on
    config = uvicorn.Config(create_app(runtime, token, executor), host=host, port=port, log_level="warning",
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_SEC, loop="asyncio")  # fmt: skip
    return uvicorn.Server(config), token


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (loopback by default)."),
    port: int = typer.Option(8765, "--port", help="Port."),
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
    executor: str | None = EXECUTOR_OPTION,
) -> None:
    """Serve the operator console and its API; runs it starts or unpauses are driven by the executor."""
    runtime = configured_runtime(db, config)
    driving = _executor(runtime, executor)
    server, _ = _server(runtime, host, port, driving)
    say(console, f"console: http://{host}:{port}/  (API docs: /api/docs); runs are driven {_where(driving)}")
    long_lived.started()
    try:
        server.run()
    finally:
        driving.close()
        runtime.close()  # notifications still being delivered; the runs' MCP servers stopped as a client should


def demo(
    port: int = typer.Option(8765, "--port", help="Port of the console."),
    model: str | None = typer.Option(
        None,
        "--model",
        help="local, local:PATH.gguf or API:MODEL@URL (default: the configuration's models.default, else local).",
    ),
    decide: str | None = typer.Option(None, "--decide", help="Decide every pause without the console."),
    instructions: Path | None = typer.Option(None, "--instructions", help="New instructions for --decide retry."),
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Run the bundled workflow (research -> analyze -> writer) on the local model with the console beside it."""
    check_decision_options(console, decide, instructions)
    runtime = configured_runtime(db, config)
    driving = _executor(runtime, None)
    server, token = _server(runtime, "127.0.0.1", port, driving)
    long_lived.started()
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            console.print(f"error: the console could not start on port {port} (in use? try --port)")
            raise typer.Exit(2)
        time.sleep(0.05)
    text = DEMO.read_text(encoding="utf-8")
    run_id = runtime.create(text, str(DEMO), model)
    link = f"http://127.0.0.1:{port}/login?token={token}&next=/runs/{run_id}"
    say(console, f"demo run {run_id}; console: {link}")
    driver = TerminalDriver(runtime, run_id, console, lambda: command_line_operator(runtime.store.url, ACT).actor,
                            driving)  # fmt: skip
    if decide is not None:
        new = instructions.read_text(encoding="utf-8") if instructions else None
        state = driver.drive(Autopilot(decide, new, DEMO_DECISIONS), None)
    else:
        state = driver.segment()
        while state.status == AWAITING_APPROVAL:  # the console decides; its process (this one) drives the run on
            driver.cards(state)
            say(console, f"paused: decide in the console — {link}")
            state = _wait(runtime, run_id, lambda s: s.status != AWAITING_APPROVAL)
            state = _wait(runtime, run_id, lambda s: s.status in FINISHED or s.status == AWAITING_APPROVAL)
    say(console, f"run {run_id}: {state.status}")
    if decide is None:
        say(console, f"the console stays up at {link} — Ctrl+C to stop")
        try:
            while thread.is_alive():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    server.should_exit = True
    runtime.close()  # notifications ([notify]) still being delivered
    raise typer.Exit(0 if state.status == COMPLETED else 3 if state.status == AWAITING_APPROVAL else 1)


def _where(executor: Executor) -> str:
    """For the start-up line: where runs are driven."""
    return f"on the {executor.description}" if executor.remote else executor.description


def _wait(runtime: Runtime, run_id: str, done: Callable[[RunState], bool]) -> RunState:
    """Poll the store: decisions made in the console run the run in the console's process."""
    while True:
        state = runtime.store.state(run_id)
        if done(state):
            return state
        time.sleep(0.3)


def gateway(
    upstream: str = typer.Option(..., "--upstream", help="The provider's base URL, or 'local' for the local model."),
    api: str = typer.Option("openai-chat", "--api", help="openai-chat, openai-responses, anthropic or ollama."),
    listen: str = typer.Option("127.0.0.1:8787", "--listen", help="HOST:PORT to serve on (loopback by default)."),
    publish: str | None = typer.Option(None, "--publish", help="ZMQ endpoint to publish SIGIL frames on."),
    publish_hold_ms: float | None = typer.Option(
        None,
        "--publish-hold-ms",
        help="How long a published frame's text may wait for more, in milliseconds: 0 to 1000, 0 for a frame per "
        "read [default: 5].",
        show_default=False,
    ),
    gate: bool = typer.Option(
        False,
        "--gate",
        help="Pass on only replies whose control packet validates (their "
        "surface text); cut any other with an in-band error (openai-chat upstreams).",
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """An OpenAI-compatible gateway for LLM SDKs: a proxy to a provider, or the local model.

    Responses pass through unchanged (with --gate: only the surface of replies whose control packet validates) and
    are published as SIGIL frames; GET /metrics serves its Prometheus metrics (with an operator's token unless the
    configuration's metrics.open)."""
    from ..providers import (
        GATED_APIS,
        MAX_PUBLISH_HOLD_SEC,
        HoldRefused,
        checked_hold,
        serve_gateway,
        without_credentials,
    )

    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        typer.echo("error: --listen must be HOST:PORT", err=True)
        raise typer.Exit(2)
    hold = None  # the gateway's default
    if publish_hold_ms is not None:
        try:
            hold = checked_hold(publish_hold_ms / 1000, MAX_PUBLISH_HOLD_SEC)
        except HoldRefused:
            typer.echo(f"error: --publish-hold-ms must be 0 to {MAX_PUBLISH_HOLD_SEC * 1000:g}, not "
                       f"{publish_hold_ms!r}", err=True)  # fmt: skip
            raise typer.Exit(2) from None
    settings = load_config(config).config
    tracing.configure(settings.tracing.endpoint, settings.tracing.service_name)
    reader = None if settings.metrics.open else _metrics_reader(settings.store.url or default_db_url(home()))
    mode = "the local model" if upstream == "local" else f"a proxy to {without_credentials(upstream)} ({api})"
    published = f"; SIGIL frames on {publish}" if publish else ""
    metrics = "open" if reader is None else "with an operator's token"
    gated = "; replies through the packet gate" if gate else ""
    if gate and (upstream == "local" or api not in GATED_APIS):
        typer.echo(f"error: --gate reads {', '.join(GATED_APIS)} replies from an upstream, not "
                   f"{'the local model' if upstream == 'local' else api}", err=True)  # fmt: skip
        raise typer.Exit(2)
    if settings.gateway.rules and not gate:
        typer.echo("error: the configuration's [gateway] rules judge replies through the packet gate: start the "
                   "gateway with --gate", err=True)  # fmt: skip
        raise typer.Exit(2)
    factory = _packet_gate(settings.policy.kernel, settings.gateway.rules) if gate else None
    console.print(f"gateway: http://{host}:{port}/v1 — {mode}{published}{gated}; /metrics {metrics}", markup=False,
                  highlight=False, soft_wrap=True)  # fmt: skip
    serve_gateway(upstream, api, host, int(port), publish, reader, factory, publish_hold=hold)


def _packet_gate(policy: list[Path], rules: list[Path]) -> Callable[[], Any]:
    """A fresh packet gate per reply, checking updates against the kernel's schemas (and ``policy.kernel`` files),
    then — with ``[gateway] rules`` — the reply rules, before any surface text is released."""
    from ..guard import ReplyPolicy, RuledGate
    from ..kernel import load_program, update_validator
    from ..packets import PacketGate

    validator = update_validator(load_program(policy).analyze())
    if not rules:
        return lambda: PacketGate(validator)
    judged = ReplyPolicy(rules)
    return lambda: RuledGate(PacketGate(validator), judged)


def _metrics_reader(store_url: str) -> Callable[[str], bool]:
    """Whether a bearer token is an operator account's that may see (the console's accounts, in the store)."""
    operators = Operators.of_home(store_url)

    def may_see(token: str) -> bool:
        who = operators.authenticate(token)
        return who is not None and who.may(SEE)

    return may_see
