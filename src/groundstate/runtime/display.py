"""The terminal view of a run: the DAG's nodes with their live states, and the approval card."""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .state import RunState

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


def approval_card(state: RunState) -> Panel | None:
    """The terminal card for the run's current pause (None when nothing waits)."""
    pause = state.pause
    if pause is None:
        return None
    style = "red" if pause.category == "safety" else "yellow"
    title = "SAFETY PAUSE" if pause.category == "safety" else "QUALITY PAUSE"
    body = Group(
        Text(f"agent: {pause.agent or '—'}", style="bold"),
        Text(pause.reason),  # model-influenced text is rendered as plain text, never as markup
        *(Text(f"also: {other}") for other in pause.others),
        Text(pause.hint, style="italic"),
    )
    return Panel(body, title=title, border_style=style)
