"""What every SSE-based provider adapter shares: bytes in, events out, truncation reported at close."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from .errors import AMBIGUOUS, ErrorRecord, classify
from .events import ErrorEvent, Event, Truncated
from .sse import ServerSentEvent, SSEParser


class StreamAdapter(ABC):
    """Subclasses implement ``_event`` (one SSE event) and ``_end_open`` (report unfinished tool calls)."""

    end_marker = "its end marker"

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self._sse = SSEParser()
        self.done = False

    def feed(self, data: bytes) -> list[Event]:
        out: list[Event] = []
        for event in self._sse.feed(data):
            if not self.done:
                self._event(event, out)
        return out

    def close(self) -> list[Event]:
        out: list[Event] = []
        truncated: list[Event] = []
        for event in self._sse.close():
            if isinstance(event, ServerSentEvent):
                if not self.done:
                    self._event(event, out)
            else:
                truncated.append(Truncated(f"the stream ended inside an event: {event.pending_line or event.data!r}"))
        if not self.done:
            self._end_open(out)  # incomplete calls are reported, never executed
            out += truncated or [Truncated(f"the stream ended without {self.end_marker}")]
        return out

    def _payload(self, event: ServerSentEvent, out: list[Event]) -> dict[str, Any] | None:
        """The event's JSON object, or None after reporting an unreadable event."""
        try:
            payload = json.loads(event.data)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            out.append(ErrorEvent(unreadable(self.provider, event.data)))
            return None
        return payload

    @abstractmethod
    def _event(self, event: ServerSentEvent, out: list[Event]) -> None:
        """Turn one SSE event into normalised events."""

    @abstractmethod
    def _end_open(self, out: list[Event]) -> None:
        """Report the tool calls still open when the stream ends early, as incomplete."""


def unreadable(provider: str, data: str) -> ErrorRecord:
    """An event that is not a JSON object decides nothing about its cause: ambiguous, with the raw data."""
    record = classify(provider, None, {"error": {"message": "a stream event that is not a JSON object"}})
    assert record.plane == AMBIGUOUS
    record.evidence["body"] = data[:2000]
    return record
