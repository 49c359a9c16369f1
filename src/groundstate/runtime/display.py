"""The terminal view of a run: the DAG's nodes with their live states, the approval card, what the run spent."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..terminal_text import terminal_safe
from .pauses import age
from .state import Pause, RunState

STYLES = {"pending": "dim", "running": "yellow", "succeeded": "green", "failed": "red", "paused": "bold magenta",
          "skipped": "cyan"}  # fmt: skip


def dag_view(state: RunState, depends: dict[str, list[str]]) -> Table:
    """The run's agents as a terminal table in dependency order, with status and attempts."""
    table = Table(title=f"{state.name} — {state.run_id} — {state.status}", expand=False)
    table.add_column("agent")
    table.add_column("depends on")
    table.add_column("state")
    table.add_column("attempts", justify="right")
    table.add_column("tools")
    for agent, node in state.nodes.items():
        tools = ", ".join(f"{t['tool']}:{(t.get('status') or '…').lstrip('/')}" for t in node.tools[-4:])
        table.add_row(agent, ", ".join(depends.get(agent, [])) or "—", Text(node.status, STYLES.get(node.status, "")),
                      str(node.attempts), Text(tools))  # fmt: skip
    return table


def approval_card(pause: Pause, run_id: str, now: datetime | None = None) -> Panel:
    """The terminal card of one open pause: its id (what a decision names), agent, age, reasons and hint."""
    style = "red" if pause.category == "safety" else "yellow"
    title = f"{'SAFETY' if pause.category == 'safety' else 'QUALITY'} PAUSE {pause.id} of {run_id}"
    line = partial(terminal_safe, one_line=True)  # each is one line: a reason holding a line break forged card lines
    body = Group(  # (a fake "also:" and hint, from a native call's name: found by an attack)
        Text(line(f"agent: {pause.agent or '—'} · waiting {age(pause, now)}"), style="bold"),
        Text(line(pause.reason)),  # model-influenced text is rendered as plain text, never as markup
        *(Text(line(f"also: {other}")) for other in pause.others),
        Text(line(pause.hint), style="italic"),
    )
    return Panel(body, title=title, border_style=style)


def usage_line(state: RunState, now: datetime | None = None) -> str:
    """What the run has spent: tokens in and out, seconds in attempts and running, and its cost when the run has a
    price table."""
    used, running = state.usage, state.wall_seconds(now or datetime.now(UTC))
    line = (f"usage: {int(used['input_tokens'])} tokens in, {int(used['output_tokens'])} out, "
            f"{used['seconds']:.1f} s in attempts, {running:.1f} s running")  # fmt: skip
    return line + (f", cost {used['cost']:g}" if state.prices else "")
