"""Finding the envelope in model output: plain JSON, a fenced block, or an object inside surrounding text.

The scan is linear: braces are matched outside JSON strings, each complete top-level object is a candidate,
and the *last* candidate that parses and carries ``control_packet`` wins, so a decoy quoted earlier in the
text (an example packet, a previous turn) never does. An object left open at the end restarts the scan one
character later, a bounded number of times (a stray ``{`` in prose must not hide the real envelope).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

PLAIN, FENCED, EMBEDDED = "plain", "fenced", "embedded"
MAX_RESTARTS = 8
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.DOTALL)
_STRUCTURE = re.compile(r'[{}"\\]')


@dataclass(frozen=True)
class Found:
    envelope: dict[str, Any]
    how: str  # PLAIN, FENCED or EMBEDDED
    start: int
    end: int


def find_envelope(text: str) -> Found | None:
    """The envelope, or None when the text carries no object with a ``control_packet`` key."""
    stripped = text.strip()
    if stripped.startswith("{"):
        plain = _as_envelope(stripped)
        if plain is not None:
            start = text.index("{")
            return Found(plain, PLAIN, start, start + len(stripped))
    fenced = [m for m in _FENCE.finditer(text) if _as_envelope(m.group(1).strip()) is not None]
    if fenced:
        last = fenced[-1]
        return Found(_as_envelope(last.group(1).strip()) or {}, FENCED, last.start(), last.end())
    found = None
    for start, end in top_level_objects(text):
        envelope = _as_envelope(text[start:end])
        if envelope is not None:
            found = Found(envelope, EMBEDDED, start, end)
    return found


def top_level_objects(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced ``{...}`` that is not inside another, strings respected."""
    spans: list[tuple[int, int]] = []
    position, restarts = 0, 0
    while True:
        start = text.find("{", position)
        if start < 0:
            return spans
        end = _object_end(text, start)
        if end is None:  # open until the end of the text: maybe a stray brace in prose
            if restarts == MAX_RESTARTS:
                return spans
            restarts += 1
            position = start + 1
            continue
        spans.append((start, end))
        position = end


def _object_end(text: str, start: int) -> int | None:
    depth, in_string, i = 0, False, start
    while True:
        match = _STRUCTURE.search(text, i)
        if match is None:
            return None
        char, i = match.group(), match.end()
        if in_string:
            if char == "\\":
                i += 1  # the escaped character, whatever it is
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i


def _as_envelope(candidate: str) -> dict[str, Any] | None:
    try:
        value = json.loads(candidate, strict=False)  # raw newlines inside strings: lenient, as models write them
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and "control_packet" in value else None
