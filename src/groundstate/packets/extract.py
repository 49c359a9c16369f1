"""Finding the envelope in model output: plain JSON, a fenced block, or an object inside surrounding text.

The scan is linear: braces are matched outside JSON strings, each complete top-level object is a candidate,
and the *last* candidate that parses and carries ``control_packet`` wins, so a decoy quoted earlier in the
text (an example packet, a previous turn) never does. An object left open at the end restarts the scan one
character later, a bounded number of times (a stray ``{`` in prose must not hide the real envelope).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

from .. import safejson

PLAIN, FENCED, EMBEDDED = "plain", "fenced", "embedded"
MAX_RESTARTS = 8
_OPENING = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n")
_CLOSING = re.compile(r"\r?\n[ \t]*```")
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
    fenced = [(s, e, body) for s, e, body in fenced_blocks(text) if _as_envelope(body.strip()) is not None]
    if fenced:
        start, end, body = fenced[-1]
        return Found(_as_envelope(body.strip()) or {}, FENCED, start, end)
    found = None
    for start, end in top_level_objects(text):
        envelope = _as_envelope(text[start:end])
        if envelope is not None:
            found = Found(envelope, EMBEDDED, start, end)
    return found


def fenced_blocks(text: str) -> list[tuple[int, int, str]]:
    """(start, end, body) of each ```` ```json ```` … ```` ``` ```` block, in order, in linear time.

    Every closing is located once; each opening is paired with the first closing that starts at or after its body
    (a regex with a lazy body would rescan the rest of the text from every unclosed opening: quadratic). Closings
    never overlap (each needs its own newline), so the precomputed list holds every candidate."""
    closings = [(m.start(), m.end()) for m in _CLOSING.finditer(text)]
    starts = [c[0] for c in closings]
    blocks: list[tuple[int, int, str]] = []
    position = 0
    while (opening := _OPENING.search(text, position)) is not None:
        body_start = opening.end()
        index = bisect.bisect_left(starts, body_start)
        if index == len(closings):
            break  # no closing after this opening, so none after any later one either
        close_start, close_end = closings[index]
        blocks.append((opening.start(), close_end, text[body_start:close_start]))
        position = close_end
    return blocks


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
        value = safejson.loads(candidate, strict=False)  # raw newlines inside strings: lenient, as models write them
    except ValueError:
        return None
    return value if isinstance(value, dict) and "control_packet" in value else None
