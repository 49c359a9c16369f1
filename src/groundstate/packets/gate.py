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
"""

from __future__ import annotations

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

# where the scanner is, outside strings
_BEFORE, _KEY, _COLON, _VALUE, _AFTER_VALUE, _SCALAR, _DONE = range(7)


@dataclass
class GateResult:
    decision: str  # ACCEPTED or ABORTED
    reason: str | None
    surface: str  # everything released, in order
    packet: PacketResult | None = None  # set when the control packet was validated
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "reason": self.reason, "surface": self.surface}


class PacketGate:
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
        self._bytes = 0
        self._state = _BEFORE
        self._depth = 0  # object/array nesting inside the envelope
        self._in_string = False
        self._escaped = False
        self._string: list[str] | None = None  # the raw text of the key being read
        self._key_chars = 0
        self._key: str | None = None  # the top-level key whose value comes next
        self._packet_raw: list[str] | None = None  # the control_packet object being read
        self._surface_raw: list[str] | None = None  # the surface string being read (still escaped)
        self._surface_chars = 0
        self._surface_cut = False
        self._seen: set[str] = set()

    # -- public -------------------------------------------------------------------------------------
    def feed(self, text: str) -> list[str]:
        """Surface text released by this chunk (empty until the control packet is validated)."""
        before = len(self.released)
        while text and self.reason is None and self._state != _DONE:
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
        if self.reason is None and self._state != _DONE:
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
        while i < n and self.reason is None and self._state != _DONE:
            if self._in_string:
                i = self._scan_string(text, i)
                continue
            char = text[i]
            if self._packet_raw is not None:
                self._packet_raw.append(char)
            i += 1
            if char in " \t\r\n":
                continue
            if self._state == _BEFORE:
                if char == "{":
                    self._depth, self._state = 1, _KEY
                continue
            if self._depth > 1 or self._state == _SCALAR:
                self._nested(char)
            elif self._state == _KEY:
                if char == '"':
                    self._in_string, self._string, self._key_chars = True, [], 0
                elif char == "}" and not self._seen:
                    self._abort("the envelope is an empty object")
                else:
                    self._abort(f"expected a key in the envelope, found {char!r}")
            elif self._state == _COLON:
                if char != ":":
                    self._abort(f"expected ':' after the key {(self._key or '')[:60]!r}, found {char!r}")
                self._state = _VALUE
            elif self._state == _VALUE:
                self._value_start(char)
            elif self._state == _AFTER_VALUE:
                if char == ",":
                    self._state = _KEY
                elif char == "}":
                    self._envelope_closed()
                else:
                    self._abort(f"expected ',' or '}}' in the envelope, found {char!r}")

    def _value_start(self, char: str) -> None:
        key = self._key
        if key == "control_packet":
            if char != "{":
                self._abort("control_packet must be a JSON object")
                return
            self._packet_raw = ["{"]
            self._depth = 2
        elif key == "surface_response":
            if char != '"':
                self._abort("surface_response must be a JSON string")
                return
            self._surface_raw = []
            self._in_string = True
        elif char in "{[":
            self._depth = 2
        elif char == '"':
            self._in_string, self._string = True, None
        else:  # a number, true, false or null: ends at the next ',' or '}'
            self._state = _SCALAR
            return
        self._state = _VALUE if self._depth > 1 or self._in_string else _AFTER_VALUE

    def _nested(self, char: str) -> None:
        if self._state == _SCALAR:  # inside a top-level number, true, false or null
            if char == ",":
                self._state = _KEY
            elif char == "}":
                self._envelope_closed()
            return
        if char == '"':
            self._in_string, self._string = True, None
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
            if self._depth == 1:
                self._state = _AFTER_VALUE
                if self._packet_raw is not None:
                    self._packet_closed("".join(self._packet_raw))
                    self._packet_raw = None

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
        char = text[end]
        if char == "\\":
            self._escaped = True
            self._string_text(char)
            return end + 1
        self._in_string = False
        if self._packet_raw is not None:
            self._packet_raw.append('"')
        self._string_closed()
        return end + 1

    def _string_text(self, text: str) -> None:
        if self._packet_raw is not None:
            self._packet_raw.append(text)
        elif self._surface_raw is not None:
            self._surface_raw.append(text)
        elif self._string is not None:  # a key: only its first MAX_KEY_CHARS characters matter
            room = MAX_KEY_CHARS - self._key_chars
            if room > 0:
                self._string.append(text[:room])
                self._key_chars += min(len(text), room)

    def _string_closed(self) -> None:
        if self._surface_raw is not None:
            self._release(final=True)
            self._surface_raw = None
            self._state = _AFTER_VALUE
            return
        if self._string is None or self._depth > 1 or self._state != _KEY:
            if self._depth == 1 and self._state == _VALUE:
                self._state = _AFTER_VALUE  # a string value of another key
            return
        try:
            key = json.loads('"' + "".join(self._string) + '"', strict=False)
        except ValueError:
            key = "".join(self._string)
        self._string = None
        if key in self._seen and key in ("control_packet", "surface_response"):
            self._abort(f"the envelope has a second {key}")
            return
        self._seen.add(key)
        if key == "surface_response" and self.packet is None:
            self._abort("surface_response came before control_packet")
            return
        self._key, self._state = key, _COLON

    # -- decisions ----------------------------------------------------------------------------------
    def _envelope_closed(self) -> None:
        self._state = _DONE
        if self.packet is None:
            self._abort("the envelope closed without a control_packet")

    def _packet_closed(self, raw: str) -> None:
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
        if self._surface_raw is None or not self._surface_raw:
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
        if self.reason is None:
            self.reason = reason
        self._surface_raw = None

    def _prefix_reason(self) -> str:
        if self._state == _BEFORE:
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
