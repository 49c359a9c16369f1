"""Reasoning written inline as ``<think>...</think>``: a property of the model, configured, never guessed.

``ThinkTags`` splits a model's text deltas into text and think deltas. Tags may be split across chunks
(``"<thi"``, ``"nk>"``): a possible partial tag at the end of a chunk is held back until the next one decides.
``opening_tag_omitted`` is for models whose output starts inside the thought (only ``</think>`` appears).
A thought is recognised only where the answer begins (``leading_only``, the default): a ``<think>`` written
later, say inside code in the answer, is text.
"""

from __future__ import annotations

from .normalized import Event, TextDelta, ThinkDelta

OPEN, CLOSE = "<think>", "</think>"


def partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ThinkTags:
    def __init__(self, *, opening_tag_omitted: bool = False, leading_only: bool = True) -> None:
        self.thinking = opening_tag_omitted
        self.leading_only = leading_only
        self._answer_started = False  # text other than whitespace has been emitted
        self._held = ""

    def feed(self, text: str) -> list[Event]:
        out: list[Event] = []
        text = self._held + text
        self._held = ""
        while text:
            if self.thinking:
                end = text.find(CLOSE)
                if end >= 0:
                    self._emit(out, text[:end])
                    self.thinking = False
                    text = text[end + len(CLOSE) :]
                    continue
                keep = partial_suffix(text, CLOSE)
            else:
                start = text.find(OPEN) if self._may_open(text) else -1
                if start >= 0 and (not self.leading_only or not text[:start].strip()):
                    self._emit(out, text[:start])
                    self.thinking = True
                    text = text[start + len(OPEN) :]
                    continue
                keep = partial_suffix(text, OPEN) if self._may_open(text) else 0
            self._emit(out, text[: len(text) - keep])
            self._held = text[len(text) - keep :]
            break
        return out

    def close(self) -> list[Event]:
        """The end of the output: a held-back partial tag was text (or thought) after all."""
        out: list[Event] = []
        self._emit(out, self._held)
        self._held = ""
        return out

    def _may_open(self, text: str) -> bool:
        return not self.leading_only or not self._answer_started

    def _emit(self, out: list[Event], text: str) -> None:
        if not text:
            return
        if self.thinking:
            out.append(ThinkDelta(text))
        else:
            out.append(TextDelta(text))
            if text.strip():
                self._answer_started = True
