"""The tags an agent's surface answer carries (RARO's protocol, told to the model in its system prompt): one
``[STATUS: SUCCESS]`` or ``[STATUS: NULL]`` — the last one counts, none is ``missing`` — and an opening
``[BYPASS: justification]`` when it did not use its mandatory tool. Read here, beside the control packet, so that the
runtime reports what they say as facts and the guard rules decide what follows."""

from __future__ import annotations

import re
from dataclasses import dataclass

_STATUS = re.compile(r"\[STATUS:\s*(SUCCESS|NULL)\s*\]", re.IGNORECASE)
_BYPASS = re.compile(r"^\s*\[BYPASS:\s*([^\]]*)\]")


@dataclass(frozen=True)
class AnswerTags:
    """``status``: ``success``, ``null`` or ``missing``; ``bypass``: the justification, or None without one."""

    status: str
    bypass: str | None


def answer_tags(surface: str) -> AnswerTags:
    """The status (the last tag; ``missing`` without one) and the bypass justification (only at the very start,
    whitespace before it aside) of a surface answer. Both patterns are linear in the answer's length."""
    found = _STATUS.findall(surface)
    bypass = _BYPASS.match(surface)
    return AnswerTags(found[-1].lower() if found else "missing", bypass.group(1).strip() if bypass else None)
