"""One held-suffix tag splitter for text that marks spans with tags (``<think>…</think>``, ``<tool_call>…``).

Sans-IO: ``feed(text)`` returns segments — text outside a span, text inside one, and the moments a span opens
or closes — and ``close()`` what was held back at the end. A tag may be split across chunks (``"<thi"``,
``"nk>"``): the longest end of a chunk that could begin the tag looked for next is held until the next chunk
decides, so the segments do not depend on how the text was cut. A span without a closing tag (``close_tag``
None) runs to the end of the output. Whether an opening tag counts is the caller's policy, asked through two
questions: ``may_open()`` (can any tag open now? if not, nothing is held back either) and ``opens_after(before)``
(does a tag found after this text open?).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

Side = Literal["outside", "inside", "opened", "closed"]
Segment = tuple[Side, str]  # the text of "opened" and "closed" is empty


def partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def _always() -> bool:
    return True


def _after_anything(_before: str) -> bool:
    return True


class TagSplitter:
    """Splits streamed text at ``open_tag`` and ``close_tag``, holding back a possible partial tag."""

    def __init__(
        self,
        open_tag: str,
        close_tag: str | None,
        *,
        inside: bool = False,
        may_open: Callable[[], bool] = _always,
        opens_after: Callable[[str], bool] = _after_anything,
    ) -> None:
        self.open_tag, self.close_tag = open_tag, close_tag
        self.inside = inside
        self._may_open, self._opens_after = may_open, opens_after
        self._held = ""

    def feed(self, text: str) -> list[Segment]:
        """The segments this chunk decides (empty text segments are left out)."""
        out: list[Segment] = []
        text, self._held = self._held + text, ""
        while text:
            rest = self._close_in(text, out) if self.inside else self._open_in(text, out)
            if rest is None:
                break
            text = rest
        return [segment for segment in out if segment[1] or segment[0] in ("opened", "closed")]

    def close(self) -> Segment:
        """What was held back: text on the side the output ended on."""
        held, self._held = self._held, ""
        return ("inside" if self.inside else "outside", held)

    def _close_in(self, text: str, out: list[Segment]) -> str | None:
        """Inside a span: the text after its closing tag, or None (the rest is inside, a partial tag held)."""
        end = text.find(self.close_tag) if self.close_tag else -1
        if end >= 0 and self.close_tag:
            out += [("inside", text[:end]), ("closed", "")]
            self.inside = False
            return text[end + len(self.close_tag) :]
        keep = partial_suffix(text, self.close_tag) if self.close_tag else 0
        out.append(("inside", text[: len(text) - keep]))
        self._held = text[len(text) - keep :]
        return None

    def _open_in(self, text: str, out: list[Segment]) -> str | None:
        """Outside: the text after an opening tag that counts, or None (the rest is outside, a partial tag held)."""
        possible = self._may_open()
        start = text.find(self.open_tag) if possible else -1
        if start >= 0 and self._opens_after(text[:start]):
            out += [("outside", text[:start]), ("opened", "")]
            self.inside = True
            return text[start + len(self.open_tag) :]
        keep = partial_suffix(text, self.open_tag) if possible else 0
        out.append(("outside", text[: len(text) - keep]))
        self._held = text[len(text) - keep :]
        return None
