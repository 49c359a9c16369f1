"""The command line's Rich console: what it renders is shown, never obeyed (``terminal_text``), its styling kept."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from .terminal_text import terminal_safe


class SafeConsole(Console):
    """A Rich console whose rendered text is ``terminal_safe`` (tables, panels, titles: model and store text in
    each); the control segments Rich makes itself (its styling, the live view's cursor moves) are kept. Rich drops
    a bell and a carriage return from text it draws; every other character a terminal acts on is escaped here."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(terminal_safe(segment.text), segment.style, segment.control)
            for segment in buffer
        )
