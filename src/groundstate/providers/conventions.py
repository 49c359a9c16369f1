"""Apply a model's text conventions (off by default) to an adapter's events: inline ``<think>`` tags first,
then tool calls written as text, on the text deltas only; every other event passes through in order."""

from __future__ import annotations

from .normalized import ErrorEvent, Event, Finish, TextDelta, Truncated
from .text_tools import TextToolCalls
from .think_tags import ThinkTags


class TextConventions:
    """A model's text conventions (inline ``<think>`` tags, tool calls written as text), configured per
    model, never guessed."""

    def __init__(
        self, *, think_tags: bool = False, opening_tag_omitted: bool = False, text_tools: str | None = None
    ) -> None:
        self.think = ThinkTags(opening_tag_omitted=opening_tag_omitted) if think_tags else None
        self.tools = TextToolCalls(text_tools) if text_tools else None

    def feed(self, events: list[Event]) -> list[Event]:
        """The events this text delta becomes under the configured conventions."""
        out: list[Event] = []
        for event in events:
            if isinstance(event, TextDelta):
                out += self._text(self.think.feed(event.text) if self.think else [event])
            elif isinstance(event, Finish | ErrorEvent | Truncated):
                out += [*self._flush(), event]  # the text before it has ended
            else:
                out.append(event)
        return out

    def close(self) -> list[Event]:
        """The end of the output: what the conventions held back."""
        return self._flush()

    def _text(self, events: list[Event]) -> list[Event]:
        if self.tools is None:
            return events
        out: list[Event] = []
        for event in events:
            out += self.tools.feed(event.text) if isinstance(event, TextDelta) else [event]
        return out

    def _flush(self) -> list[Event]:
        held = self._text(self.think.close()) if self.think else []
        return held + (self.tools.close() if self.tools else [])
