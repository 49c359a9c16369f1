"""Reasoning written inline as ``<think>...</think>``: a property of the model, configured, never guessed.

``ThinkTags`` splits a model's text deltas into text and think deltas. Tags may be split across chunks
(``"<thi"``, ``"nk>"``): a possible partial tag at the end of a chunk is held back until the next one decides.
``opening_tag_omitted`` is for models whose output starts inside the thought (only ``</think>`` appears).
A thought is recognised only where the answer begins (``leading_only``, the default): a ``<think>`` written
later, say inside code in the answer, is text.
"""

from __future__ import annotations

from .normalized import Event, TextDelta, ThinkDelta
from .tag_split import Segment, TagSplitter

OPEN, CLOSE = "<think>", "</think>"


class ThinkTags:
    """Text deltas split into text and think deltas at ``<think>`` tags (see the module docstring)."""

    def __init__(self, *, opening_tag_omitted: bool = False, leading_only: bool = True) -> None:
        self.leading_only = leading_only
        self._answer_started = False  # text other than whitespace has been emitted
        self._splitter = TagSplitter(
            OPEN, CLOSE, inside=opening_tag_omitted, may_open=self._may_open, opens_after=self._opens_after
        )

    @property
    def thinking(self) -> bool:
        """Whether the text now is inside a thought."""
        return self._splitter.inside

    def feed(self, text: str) -> list[Event]:
        """The text and think deltas this chunk decides."""
        return self._events(self._splitter.feed(text))

    def close(self) -> list[Event]:
        """The end of the output: a held-back partial tag was text (or thought) after all."""
        return self._events([self._splitter.close()])

    def _may_open(self) -> bool:
        return not self.leading_only or not self._answer_started

    def _opens_after(self, before: str) -> bool:
        return not self.leading_only or not before.strip()

    def _events(self, segments: list[Segment]) -> list[Event]:
        out: list[Event] = []
        for side, text in segments:
            if side == "inside" and text:
                out.append(ThinkDelta(text))
            elif side == "outside" and text:
                out.append(TextDelta(text))
                self._answer_started = self._answer_started or bool(text.strip())
        return out
