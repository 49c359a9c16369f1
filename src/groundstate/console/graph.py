"""The run's DAG as plain SVG, drawn on the server (no script, no build step): agents in columns by depth, edges
from each dependency, nodes coloured by state, the paused ones outlined and labelled so they cannot be missed.

Every text in the drawing is escaped; each node links to its agent's pane on the same page.
"""

from __future__ import annotations

from html import escape

from markupsafe import Markup

from ..runtime import RunState

WIDTH, HEIGHT, GAP_X, GAP_Y, MARGIN = 180, 56, 70, 22, 12
FILL = {"pending": "#ffffff", "running": "#fdf0c2", "paused": "#f7d9f6", "succeeded": "#d6f0d8", "failed": "#f6cdcd",
        "skipped": "#d9edf4"}  # fmt: skip
STROKE = {"pending": "#9a9ab0", "running": "#d9a400", "paused": "#a0299b", "succeeded": "#2e8b3a", "failed": "#c62828",
          "skipped": "#2a8aa8"}  # fmt: skip


def dag_svg(state: RunState, columns: list[list[tuple[str, list[str]]]]) -> Markup:
    """The DAG of ``columns`` (from ``views.layers``) with each node in its state."""
    where: dict[str, tuple[int, int]] = {}
    for x, column in enumerate(columns):
        for y, (agent, _) in enumerate(column):
            where[agent] = (MARGIN + x * (WIDTH + GAP_X), MARGIN + y * (HEIGHT + GAP_Y))
    width = MARGIN * 2 + max(len(columns), 1) * (WIDTH + GAP_X) - GAP_X
    height = MARGIN * 2 + max((len(c) for c in columns), default=1) * (HEIGHT + GAP_Y) - GAP_Y
    parts = [f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="the run\'s agents and their dependencies">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#667"/></marker></defs>']  # fmt: skip
    for column in columns:
        for agent, depends in column:
            for upstream in depends:
                if upstream in where:
                    parts.append(_edge(where[upstream], where[agent], upstream, agent))
    for agent, (x, y) in where.items():
        parts.append(_node(agent, str(state.nodes[agent].status), state.nodes[agent].attempts, x, y))
    parts.append("</svg>")
    return Markup("".join(parts))


def _edge(start: tuple[int, int], end: tuple[int, int], upstream: str, agent: str) -> str:
    x1, y1 = start[0] + WIDTH, start[1] + HEIGHT // 2
    x2, y2 = end[0], end[1] + HEIGHT // 2
    middle = (x1 + x2) // 2
    return (f'<path class="edge" data-from="{escape(upstream)}" data-to="{escape(agent)}" '
            f'd="M {x1} {y1} C {middle} {y1}, {middle} {y2}, {x2 - 2} {y2}" fill="none" stroke="#667" '
            'stroke-width="1.6" marker-end="url(#arrow)"/>')  # fmt: skip


def _node(agent: str, status: str, attempts: int, x: int, y: int) -> str:
    paused = status == "paused"
    label = f"{status}" + (f" · attempt {attempts}" if attempts else "")
    outline = (f'<rect x="{x - 5}" y="{y - 5}" width="{WIDTH + 10}" height="{HEIGHT + 10}" rx="10" fill="none" '
               f'stroke="{STROKE["paused"]}" stroke-width="2" stroke-dasharray="6 4"/>' if paused else "")  # fmt: skip
    name = escape(agent if len(agent) <= 22 else agent[:21] + "…")
    return (f'<a href="#pane-{escape(agent)}" class="node {escape(status)}" data-agent="{escape(agent)}">'
            f"<title>{escape(agent)}: {escape(label)}</title>{outline}"
            f'<rect x="{x}" y="{y}" width="{WIDTH}" height="{HEIGHT}" rx="7" fill="{FILL.get(status, "#fff")}" '
            f'stroke="{STROKE.get(status, "#667")}" stroke-width="{4 if paused else 2}"/>'
            f'<text x="{x + 10}" y="{y + 22}" font-weight="600" font-size="14">{name}</text>'
            f'<text x="{x + 10}" y="{y + 42}" font-size="12" fill="#445">{escape(label)}</text></a>')  # fmt: skip
