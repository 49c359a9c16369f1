"""The streaming gate: nothing the model says is shown before its control packet has been validated.

Sans-IO and linear: ``feed(text)`` returns the surface text that may be shown now, ``close()`` the decision.
The envelope is scanned as it streams (braces and keys outside strings, at the top level only):

- aborted if ``surface_response`` comes before ``control_packet``, if no ``{`` starts within the first
  ``prefix_bytes`` bytes, or if the ``control_packet`` key has not been read completely within them;
- the control packet is validated the moment its object closes (a rejected packet aborts the stream);
- only then is ``surface_response`` released, decoded incrementally as it arrives;
- the stream must end with the envelope closed: an aborted or unfinished stream yields no accepted packet, so
  the kernel is never changed by it (the caller applies updates only from an accepted result).

Decisions depend only on the text, never on how it was split into chunks.

Theory of operation
-------------------
The scanner is one state machine over characters. ``Where`` names every state; ``_STRUCTURE`` says, for each
state outside a string, where each structural character leads and which action runs on the way; ``_STRING_END``
says where the end of each kind of string leads. Whitespace outside strings changes nothing. Two states are
terminal: ``CLOSED`` (the envelope's last brace was read) and ``ABORTED`` — the one error state. Every refusal,
whether the table has no edge for a character or an action finds the content wrong (a duplicate key, a rejected
packet), goes through ``_abort``, which records the first reason and moves to ``ABORTED``; nothing leaves it.

Inside strings the only memory is whether the previous character was a backslash (``_escaped``); inside
nested values, the nesting depth. What a string's text is kept for follows from the state: a key is kept (its
first ``MAX_KEY_CHARS`` characters), the surface is kept to be released, strings inside the control packet are
kept as part of the packet's raw text, every other string is dropped.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .. import safejson
from .parse import Limits, PacketResult, check_packet
from .updates import UpdateValidator

ACCEPTED, ABORTED = "accepted", "aborted"
_STRING_STOP = re.compile(r'["\\]')
_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}$")
_ESCAPE = re.compile(r'\\(?:(["\\/bfnrt]|u[0-9a-fA-F]{4})|.?)', re.DOTALL)
MAX_KEY_CHARS = 256


class Where(enum.Enum):
    """Where the scanner is in the envelope."""

    BEFORE = "before the envelope"  # prose before the first '{' is skipped (within the prefix budget)
    KEY = "expecting a key"
    IN_KEY = "inside a key"
    COLON = "expecting ':'"
    VALUE = "expecting a value"
    NESTED = "inside an object or array value"
    NESTED_STRING = "inside a string within a nested value"
    SURFACE = "inside surface_response"
    OTHER_STRING = "inside a top-level string value"
    SCALAR = "inside a number, true, false or null"
    AFTER_VALUE = "expecting ',' or '}'"
    CLOSED = "after the envelope"
    ABORTED = "aborted"

    # Enum's own hash is a Python function (of the member's name); the scanner looks states up in sets and tables
    # for every character, so members hash by identity instead (each member is a singleton: equal means identical)
    __hash__ = object.__hash__


_TERMINAL = frozenset({Where.CLOSED, Where.ABORTED})
_STRINGS = frozenset({Where.IN_KEY, Where.NESTED_STRING, Where.SURFACE, Where.OTHER_STRING})
_ANY = ""  # the edge taken by a character the row does not name

# (state outside strings) -> {character: (next state, action or None)}; a row without _ANY refuses the rest.
_Edge = tuple[Where, str | None]
_STRUCTURE: dict[Where, dict[str, _Edge]] = {
    Where.BEFORE: {"{": (Where.KEY, "_open_envelope"), _ANY: (Where.BEFORE, None)},
    Where.KEY: {'"': (Where.IN_KEY, "_open_key")},
    Where.COLON: {":": (Where.VALUE, None)},
    Where.VALUE: {
        "{": (Where.NESTED, "_open_object"),
        "[": (Where.NESTED, "_open_array"),
        '"': (Where.OTHER_STRING, "_open_string"),
        _ANY: (Where.SCALAR, "_open_scalar"),
    },
    Where.NESTED: {
        '"': (Where.NESTED_STRING, None),
        "{": (Where.NESTED, "_deeper"),
        "[": (Where.NESTED, "_deeper"),
        "}": (Where.NESTED, "_shallower"),
        "]": (Where.NESTED, "_shallower"),
        _ANY: (Where.NESTED, None),
    },
    Where.SCALAR: {",": (Where.KEY, None), "}": (Where.CLOSED, "_close_envelope"), _ANY: (Where.SCALAR, None)},
    Where.AFTER_VALUE: {",": (Where.KEY, None), "}": (Where.CLOSED, "_close_envelope")},
}
# (state outside strings) -> a run of characters that leaves the scanner where it was, with nothing to do on the way:
# whitespace; in the states whose row sends every other character back to the same state without an action, every
# such character; inside a nested value, also whole strings (NESTED -> NESTED_STRING -> NESTED, no action; their
# text kept only as the packet's raw text, as the run is). A string not closed within the chunk ends the run there and
# is read as it streams. Consuming a run at once is what the table does one character at a time (test_gate checks
# the two against each other); possessive quantifiers keep the match linear on any input.
_INERT: dict[Where, re.Pattern[str]] = {where: re.compile(r"[ \t\r\n]+") for where in _STRUCTURE}
_INERT[Where.BEFORE] = re.compile(r"[^{]+")
_INERT[Where.NESTED] = re.compile(r'(?:[^"{}\[\]]++|"(?:[^"\\]++|\\[\s\S])*+")++')
_INERT[Where.SCALAR] = re.compile(r"[^,}]+")
# (string state) -> where its closing quote leads, and the action on the way
_STRING_END: dict[Where, _Edge] = {
    Where.IN_KEY: (Where.COLON, "_close_key"),
    Where.NESTED_STRING: (Where.NESTED, None),
    Where.OTHER_STRING: (Where.AFTER_VALUE, None),
    Where.SURFACE: (Where.AFTER_VALUE, "_close_surface"),
}


@dataclass
class GateResult:
    """The gate's verdict on one output: what was released, and the validated packet when accepted."""

    decision: str  # ACCEPTED or ABORTED
    reason: str | None
    surface: str  # everything released, in order
    packet: PacketResult | None = None  # set when the control packet was validated
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The verdict as reported by ``groundstate packets gate``: with an accepted packet, which of its updates
        the validator accepted and which it dropped."""
        verdict: dict[str, Any] = {"decision": self.decision, "reason": self.reason, "surface": self.surface}
        if self.packet is not None:
            checked = self.packet.to_json()
            verdict |= {key: checked[key] for key in ("accepted_updates", "dropped_updates")}
        return verdict


class PacketGate:
    """Holds back a streamed envelope's surface text until its control packet has been validated."""

    def __init__(
        self,
        validator: UpdateValidator | None,
        limits: Limits | None = None,
        *,
        prefix_bytes: int = 4096,
        max_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        self.validator = validator
        self.limits = limits or Limits()
        self.prefix_bytes = prefix_bytes
        self.max_bytes = max_bytes
        self.reason: str | None = None
        self.packet: PacketResult | None = None
        self.released: list[str] = []
        self.warnings: list[str] = []
        self.where = Where.BEFORE
        self._bytes = 0
        self._depth = 0  # object/array nesting inside the envelope (1 at its top level)
        self._escaped = False  # the previous character inside a string was a backslash
        self._key_text: list[str] = []  # the raw text of the key being read
        self._key_chars = 0
        self._key: str | None = None  # the top-level key whose value comes next
        self._packet_raw: list[str] | None = None  # the control_packet object being read
        self._surface_raw: list[str] = []  # surface text read but not yet released (still escaped)
        self._surface_chars = 0
        self._surface_cut = False
        self._seen: set[str] = set()

    # -- public -------------------------------------------------------------------------------------
    def feed(self, text: str) -> list[str]:
        """Surface text released by this chunk (empty until the control packet is validated)."""
        before = len(self.released)
        while text and self.where not in _TERMINAL:
            piece = text
            if "control_packet" not in self._seen:  # inside the bounded prefix: account for every byte
                budget = self.prefix_bytes - self._bytes
                if budget <= 0:
                    self._abort(self._prefix_reason())
                    break
                piece = text[:budget]  # at most `budget` bytes: every character is at least one
                while len(piece.encode("utf-8", "surrogatepass")) > budget:
                    piece = piece[: len(piece) // 2] or piece[:1]
                    if len(piece) == 1:
                        break
            self._bytes += len(piece.encode("utf-8", "surrogatepass"))
            if self._bytes > self.max_bytes:
                self._abort(f"the output is larger than {self.max_bytes} bytes")
                break
            self._scan(piece)
            text = text[len(piece) :]
            self._release()
        return self.released[before:]

    def close(self) -> GateResult:
        """The decision: accepted only when the envelope closed after a validated control packet."""
        if self.where not in _TERMINAL:
            if "control_packet" not in self._seen:
                self._abort("the stream ended before a control_packet key")
            elif self.packet is None:
                self._abort("the stream ended inside the control packet")
            else:
                self._abort("the stream ended before the envelope was complete")
        if self.reason is None and "surface_response" not in self._seen:
            self.warnings.append("the envelope has no surface_response")
        decision = ACCEPTED if self.reason is None else ABORTED
        packet = self.packet if decision == ACCEPTED else None
        return GateResult(decision, self.reason, "".join(self.released), packet, self.warnings)

    # -- scanning -----------------------------------------------------------------------------------
    def _scan(self, text: str) -> None:
        i, n = 0, len(text)
        while i < n and self.where not in _TERMINAL:
            if self.where in _STRINGS:
                i = self._scan_string(text, i)
                continue
            run = _INERT[self.where].match(text, i)
            if run is not None:  # characters that leave the state as it is, consumed as one run
                if self._packet_raw is not None:
                    self._packet_raw.append(run.group())
                i = run.end()
                continue
            char = text[i]
            i += 1
            if self._packet_raw is not None:
                self._packet_raw.append(char)
            row = _STRUCTURE[self.where]
            edge = row.get(char) or row.get(_ANY)
            if edge is None:
                self._abort(self._unexpected(char))
                continue
            self.where, action = edge
            if action is not None:
                getattr(self, action)(char)

    def _scan_string(self, text: str, i: int) -> int:
        """Consume string content from ``i``; returns where scanning continues."""
        if self._escaped:
            self._escaped = False
            self._string_text(text[i])
            return i + 1
        match = _STRING_STOP.search(text, i)
        end = match.start() if match else len(text)
        self._string_text(text[i:end])
        if match is None:
            return end
        if text[end] == "\\":
            self._escaped = True
            self._string_text("\\")
            return end + 1
        if self._packet_raw is not None:
            self._packet_raw.append('"')
        self.where, action = _STRING_END[self.where]
        if action is not None:
            getattr(self, action)('"')
        return end + 1

    def _string_text(self, text: str) -> None:
        if self._packet_raw is not None:
            self._packet_raw.append(text)
        elif self.where is Where.SURFACE:
            self._surface_raw.append(text)
        elif self.where is Where.IN_KEY:  # only a key's first MAX_KEY_CHARS characters matter
            room = MAX_KEY_CHARS - self._key_chars
            if room > 0:
                self._key_text.append(text[:room])
                self._key_chars += min(len(text), room)

    def _unexpected(self, char: str) -> str:
        if self.where is Where.KEY:
            if char == "}" and not self._seen:
                return "the envelope is an empty object"
            return f"expected a key in the envelope, found {char!r}"
        if self.where is Where.COLON:
            return f"expected ':' after the key {(self._key or '')[:60]!r}, found {char!r}"
        return f"expected ',' or '}}' in the envelope, found {char!r}"

    # -- actions (named in the tables) --------------------------------------------------------------
    def _open_envelope(self, _char: str) -> None:
        self._depth = 1

    def _open_key(self, _char: str) -> None:
        self._key_text, self._key_chars = [], 0

    def _close_key(self, _char: str) -> None:
        raw = "".join(self._key_text)
        try:
            key = json.loads('"' + raw + '"', strict=False)
        except ValueError:
            key = raw
        if key in self._seen and key in ("control_packet", "surface_response"):
            self._abort(f"the envelope has a second {key}")
            return
        self._seen.add(key)
        if key == "surface_response" and self.packet is None:
            self._abort("surface_response came before control_packet")
            return
        self._key = key

    def _open_object(self, char: str) -> None:
        if self._key == "surface_response":
            self._abort("surface_response must be a JSON string")
            return
        self._depth = 2
        if self._key == "control_packet":
            self._packet_raw = [char]

    def _open_array(self, _char: str) -> None:
        if self._key in ("control_packet", "surface_response"):
            self._abort(self._wrong_type())
            return
        self._depth = 2

    def _open_string(self, _char: str) -> None:
        if self._key == "control_packet":
            self._abort(self._wrong_type())
        elif self._key == "surface_response":
            self.where = Where.SURFACE

    def _open_scalar(self, _char: str) -> None:
        if self._key in ("control_packet", "surface_response"):
            self._abort(self._wrong_type())

    def _wrong_type(self) -> str:
        if self._key == "control_packet":
            return "control_packet must be a JSON object"
        return "surface_response must be a JSON string"

    def _deeper(self, _char: str) -> None:
        self._depth += 1

    def _shallower(self, _char: str) -> None:
        self._depth -= 1
        if self._depth > 1:
            return
        self.where = Where.AFTER_VALUE
        if self._packet_raw is not None:
            raw, self._packet_raw = "".join(self._packet_raw), None
            self._check_packet(raw)

    def _close_surface(self, _char: str) -> None:
        self._release(final=True)

    def _close_envelope(self, _char: str) -> None:
        if self.packet is None:
            self._abort("the envelope closed without a control_packet")

    # -- decisions ----------------------------------------------------------------------------------
    def _check_packet(self, raw: str) -> None:
        try:
            value = safejson.loads(raw, strict=False)
        except ValueError as exc:
            self._abort(f"the control packet is not valid JSON: {exc}")
            return
        result = check_packet(value, self.validator, self.limits, PacketResult(None, "", "stream"))
        if not result.ok:
            self._abort("the control packet was rejected: " + "; ".join(result.errors))
            return
        self.packet = result
        self.warnings += result.warnings

    def _release(self, final: bool = False) -> None:
        if self.where is not Where.SURFACE and not final:
            return
        if not self._surface_raw:
            return
        raw = "".join(self._surface_raw)
        cut = len(raw) if final else _safe_cut(raw)
        bad = _bad_escape(raw, cut)
        text = json.loads('"' + raw[: cut if bad is None else bad] + '"', strict=False)
        self._surface_raw = [raw[cut:]] if cut < len(raw) else []
        room = self.limits.max_surface_chars - self._surface_chars
        if len(text) > room:
            if not self._surface_cut:
                self.warnings.append(f"surface_response exceeds {self.limits.max_surface_chars} characters: cut")
                self._surface_cut = True
            text = text[: max(room, 0)]
        if text:
            self._surface_chars += len(text)
            self.released.append(text)
        if bad is not None:  # what came before the bad escape was valid and is released, whatever the chunking
            self._abort("surface_response is not a valid JSON string: an invalid escape sequence")

    def _abort(self, reason: str) -> None:
        """The one way into the error state: the first reason is kept, nothing more is released."""
        if self.reason is None:
            self.reason = reason
        self.where = Where.ABORTED
        self._surface_raw = []

    def _prefix_reason(self) -> str:
        if self.where is Where.BEFORE:
            return f"no JSON object started within the first {self.prefix_bytes} bytes"
        return f"the control_packet key did not appear within the first {self.prefix_bytes} bytes"


def _safe_cut(raw: str) -> int:
    """Where the escaped text can be decoded: not inside an escape, not between the halves of a surrogate pair."""
    cut = len(raw)
    last = raw.rfind("\\", max(0, cut - 12))
    if last >= 0 and _starts_escape(raw, last):
        tail = raw[last:]
        if len(tail) == 1 or (tail[1] == "u" and len(tail) < 6):
            cut = last  # an escape still arriving
        elif tail[1] == "u" and len(tail) == 6 and _HIGH_SURROGATE.search(tail):
            cut = last  # the first half of a pair: wait for the second
    if cut < len(raw):
        pair = _HIGH_SURROGATE.search(raw, max(0, cut - 6), cut)
        if pair is not None and _starts_escape(raw, pair.start()):
            cut = pair.start()
    return cut


def _bad_escape(raw: str, end: int) -> int | None:
    """Where the first invalid escape of ``raw[:end]`` starts, or None."""
    for match in _ESCAPE.finditer(raw, 0, end):
        if match.group(1) is None:
            return match.start()
    return None


def _starts_escape(raw: str, index: int) -> bool:
    """Whether the backslash at ``index`` begins an escape (it is not itself escaped)."""
    run = 0
    while index - run - 1 >= 0 and raw[index - run - 1] == "\\":
        run += 1
    return run % 2 == 0
