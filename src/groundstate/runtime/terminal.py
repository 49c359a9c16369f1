"""Driving a run from a terminal (``run``, ``runs resume``, ``demo``): a live view while the run moves, every open
pause printed as its own card when it stops, each answered by a decision that names it.

The live view is stopped before anything is asked or printed, so a prompt is never overdrawn by a refresh; links
and commands are printed whole (never wrapped at the terminal's width, which would break them when copied from a
pipe or a narrow window).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from ..terminal_text import terminal_safe
from .decisions import decision_problem
from .display import approval_card, dag_view
from .executors import Executor, InProcessExecutor
from .pauses import current_instructions
from .runner import Runtime
from .state import AWAITING_APPROVAL, Pause, RunState
from .workflow import workflow_of

Asker = Callable[[RunState, Pause], "tuple[str, str | None] | None"]  # a decision and new instructions, or None


def check_decision_options(console: Console, decision: str | None, instructions: Path | None) -> None:
    """Exit 2 with the reason when ``--decide`` (or a decision argument) and ``--instructions`` cannot be used as
    given (``decision_problem``): the same check for ``run``, ``demo`` and ``runs decide``."""
    problem = decision_problem(decision, instructions is not None)
    if problem is not None:
        console.print(f"error: {problem}", markup=False, highlight=False)
        raise typer.Exit(2)


def say(console: Console, text: str) -> None:
    """One line as it is: no markup, no highlighting, never wrapped (links and commands stay usable) — and no
    character a terminal acts on (``terminal_text.terminal_safe``; the CLI's consoles escape it too)."""
    console.print(terminal_safe(text), markup=False, highlight=False, soft_wrap=True)


@dataclass
class Autopilot:
    """``--decide``: the same decision for every pause, at most ``most`` times; a retry with unchanged instructions
    stops once the agent pauses again for the same reason (another retry would too)."""

    decision: str
    instructions: str | None
    most: int
    made: int = 0
    retried: set[tuple[str | None, str]] = field(default_factory=set)  # (agent, reason) of pauses answered by retry

    def why_stop(self, pause: Pause) -> str | None:
        """Why this pause is left for an operator (None: the autopilot answers it)."""
        if self.made >= self.most:
            return f"stopped after {self.made} decisions (--max-decisions {self.most})"
        if self.decision == "retry" and self.instructions is None and (pause.agent, pause.reason) in self.retried:
            return (f"stopped: agent {pause.agent!r} paused again for the same reason after a retry with unchanged "
                    "instructions, so another would too — give --instructions, or decide skip or abort")  # fmt: skip
        return None

    def answer(self, pause: Pause) -> tuple[str, str | None]:
        """The decision for this pause (counted)."""
        self.made += 1
        if self.decision == "retry":
            self.retried.add((pause.agent, pause.reason))
        return self.decision, self.instructions


class TerminalDriver:
    """Drives one run with a live DAG view and hands its pauses to an autopilot or an ``ask`` callback."""

    def __init__(
        self,
        runtime: Runtime,
        run_id: str,
        console: Console,
        actor: Callable[[], str],
        executor: Executor | None = None,
    ) -> None:
        self.runtime, self.run_id, self.console = runtime, run_id, console
        self.actor = actor  # who decides (resolved when a decision is made: the token's account)
        self.executor = executor or InProcessExecutor(runtime)  # where the segments are driven
        self.depends = {a.id: a.depends_on for a in workflow_of(runtime.store.state(run_id)).agents}

    def segment(self, resume_failed: bool = False) -> RunState:
        """Drive until the run completes, fails, is aborted or waits for an operator, with the live view on; the
        view shows the final state and is stopped before this returns."""
        with Live(self.view(), console=self.console, refresh_per_second=4, transient=False) as live:

            def refresh(_: object) -> None:
                live.update(self.view())

            self.runtime.listeners.append(refresh)
            try:
                state = asyncio.run(self._drive(refresh, resume_failed))
            finally:
                self.runtime.listeners.remove(refresh)
            live.update(dag_view(state, self.depends))
        if not self.console.is_terminal:
            self.console.line()  # rich ends a live view without a newline when it is not on a terminal
        return state

    async def _drive(self, refresh: Callable[[object], None], resume_failed: bool) -> RunState:
        """One segment on the executor; a remote one's progress is read from the store for the view."""
        segment = asyncio.ensure_future(self.executor.drive(self.run_id, resume_failed=resume_failed))
        while self.executor.remote and not segment.done():
            await asyncio.wait([segment], timeout=0.25)
            refresh(None)
        return await segment

    def view(self) -> Table:
        """The run's DAG as it stands in the store."""
        return dag_view(self.runtime.store.state(self.run_id), self.depends)

    def cards(self, state: RunState) -> None:
        """Every open pause, oldest first, each its own card with its id."""
        for pause in state.pauses:
            self.console.print(approval_card(pause, state.run_id))

    def drive(self, autopilot: Autopilot | None, ask: Asker | None, resume_failed: bool = False) -> RunState:
        """Drive, answering pauses, until the run ends or a pause is left for later (``ask`` returning None, no
        ``ask`` and no autopilot, or the autopilot's reason to stop, printed with the command that decides)."""
        while True:
            state = self.segment(resume_failed)
            resume_failed = False
            if state.status != AWAITING_APPROVAL:
                return state
            self.cards(state)
            for pause in list(state.pauses):
                choice = self._choose(state, pause, autopilot, ask)
                if choice is None:
                    return self.runtime.store.state(self.run_id)
                decision, instructions = choice
                state = self.runtime.decide(self.run_id, decision, instructions, self.actor(), pause=pause.id)
                say(self.console, f"pause {pause.id} ({pause.agent}): {decision}")
                if decision == "abort":
                    return state

    def _choose(
        self, state: RunState, pause: Pause, autopilot: Autopilot | None, ask: Asker | None
    ) -> tuple[str, str | None] | None:
        later = f"decide with: groundstate runs decide {self.run_id} retry|skip|abort --pause {pause.id}"
        if autopilot is not None:
            stop = autopilot.why_stop(pause)
            if stop is None:
                return autopilot.answer(pause)
            say(self.console, f"{stop}; {later}")
            return None
        choice = ask(state, pause) if ask is not None else None
        if choice is None:
            say(self.console, f"paused; {later}")
        return choice


def ask_in_terminal(console: Console) -> Asker | None:
    """The interactive question for each pause when stdin is a terminal (None otherwise: pauses are left)."""
    if not sys.stdin.isatty():
        return None

    def ask(state: RunState, pause: Pause) -> tuple[str, str | None] | None:
        from rich.prompt import Prompt

        prompt = f"pause {pause.id} ({pause.agent}): decision"
        choice = Prompt.ask(prompt, choices=["retry", "edit", "skip", "abort", "later"], default="retry",
                            console=console)  # fmt: skip
        if choice == "later":
            return None
        if choice != "edit":
            return choice, None
        current = current_instructions(state).get(pause.agent or "", "")
        return "retry", edit_instructions(console, current)

    return ask


def edit_instructions(console: Console, current: str) -> str | None:
    """The agent's instructions, edited from the current ones: in ``$VISUAL``/``$EDITOR`` when one is set, else on
    the prompt, which shows them first (an empty answer keeps them). None: unchanged."""
    import os

    import click
    from rich.prompt import Prompt

    if os.environ.get("VISUAL") or os.environ.get("EDITOR"):
        edited = click.edit(current)
        return edited.strip() if edited and edited.strip() != current.strip() else None
    say(console, "current instructions:")
    say(console, current)
    answer = Prompt.ask("new instructions (Enter keeps them)", default="", show_default=False, console=console)
    return answer.strip() or None
