"""An error told inside a stream that has already begun: the status line is sent, so a failure after it — the
upstream breaking off mid-answer — can only be said in the stream's own framing. Ending the stream quietly instead
hands the client a part of an answer as if it were all of it (an attack on the gateway found exactly that).

Each API's SDK raises its own error on what is written here: OpenAI's chat and Responses SDKs on an SSE event whose
data has an ``error`` object (the Responses SDK also on an ``error`` event), Anthropic's on an ``error`` event,
Ollama's client on an NDJSON line with an ``error`` field. So that the error is an event of its own, never merged
into a fragment the upstream left, the gateway relays a stream's events whole (``event_end``): bytes of an event
still arriving wait for its end — on a break they are dropped, as a client drops an event its stream never ended.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import GroundstateError
from .openai_wire import problem_body

MAX_HELD = 1 << 20  # bytes of one unfinished event held back; past them they are relayed as they are
# an SSE event ends at a blank line: a line ending (CRLF, LF or CR) right after another, each of either kind —
# LF LF, CR CR, CRLF CRLF, and the mixed LF CR(LF), CRLF LF, CRLF CR (a CR then CRLF contains CR CR)
_SSE_ENDS = (b"\n\n", b"\r\r", b"\r\n\r\n", b"\n\r", b"\r\n\n", b"\r\n\r")
_LONGEST_END = max(map(len, _SSE_ENDS))


def event_end(api: str, data: bytes) -> int:
    """How many bytes of ``data`` (a stream of ``api``'s events) are whole events: up to the end of its last blank
    line (SSE, whatever line endings it mixes) or its last line (Ollama's NDJSON); 0 when none ends in it."""
    if api == "ollama":
        return data.rfind(b"\n") + 1
    if data.endswith(_SSE_ENDS):  # the common arrival, events whole: no end can lie past the last byte
        return len(data)
    return max((found + len(end) for end in _SSE_ENDS if (found := data.rfind(end)) >= 0), default=0)


def resumed(api: str) -> bytes:
    """What ends a line and an event, written before an error that follows bytes of an event the upstream never
    finished (given on past ``MAX_HELD``): so that the error is an event of its own, never the end of that one."""
    return b"\n" if api == "ollama" else b"\n\n"


class WholeEvents:
    """A stream's bytes as they arrive, given on only up to the end of their last whole event; the bytes of an event
    still arriving are held (at most ``MAX_HELD``, then given on as they are). Each arrival is searched once (and
    its first bytes with the stream's last few before them), never copied to be searched, and held
    pieces are joined once, when given on: a stream that never ends an event costs what it sends, not its square
    (joined and searched whole on every arrival, a long run without an event's end stalled the gateway)."""

    MAX_HELD = MAX_HELD

    def __init__(self, api: str) -> None:
        self.api = api
        self._held: list[bytes] = []
        self._size = 0
        self._last = b""  # the stream's last few bytes so far (given on or held)
        self.between_events = True  # False once bytes of an unfinished event were given on (past MAX_HELD)

    def error(self, error: GroundstateError) -> bytes:
        """The in-band error to give on after what was given: an event of its own (in_band_error), begun on a fresh
        line after an event given on unfinished."""
        return (b"" if self.between_events else resumed(self.api)) + in_band_error(self.api, error)

    def take(self, data: bytes) -> bytes:
        """The bytes to give on now (empty: all of ``data`` is held)."""
        end = event_end(self.api, data)
        before, tail = self._last, _LONGEST_END - 1
        if before and end < len(data):  # an end ("\r\n\r\n", 4 bytes) may begin in the last bytes before these
            end = max(end, event_end(self.api, before + data[:tail]) - len(before))
        self._last = data[-tail:] if len(data) >= tail else (before + data)[-tail:]
        if not end:
            self._held.append(data)
            self._size += len(data)
            if self._size <= MAX_HELD:
                return b""
            end = len(data)  # past the bound: given on as they are
            self._held.pop()
            self.between_events = False
        else:
            self.between_events = True
        given = b"".join([*self._held, data[:end]]) if self._held else data[:end]
        rest = data[end:]
        self._held, self._size = ([rest], len(rest)) if rest else ([], 0)
        return given

    def rest(self) -> bytes:
        """What is held when the stream ends: bytes of an event the upstream never finished (dropped, as a client
        drops an event its stream never ended: the stream is then told it broke off)."""
        rest = b"".join(self._held)
        self._held, self._size = [], 0
        return rest


def in_band_error(api: str, error: GroundstateError) -> bytes:
    """The event that tells ``error`` to a client of ``api``, after the last whole event it was sent."""
    _, body = problem_body(error)
    if api == "ollama":
        return _json({"error": body["error"]["message"]}) + b"\n"
    if api == "anthropic":
        detail = {"type": "error", "error": {"type": body["error"]["type"], "message": body["error"]["message"]}}
        return b"event: error\ndata: " + _json(detail) + b"\n\n"
    if api == "openai-responses":
        return b"event: error\ndata: " + _json({"type": "error", **body}) + b"\n\n"
    return b"data: " + _json(body) + b"\n\n"


def _json(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")
