"""Normalised provider events: what every adapter emits, whatever the provider sent.

Tool-call arguments are parsed once the call is complete; if they are not valid JSON the event carries the
parse error and the raw text, and ``arguments`` is None — arguments are never "repaired".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from .. import safejson
from .errors import ErrorRecord

FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "refusal", "error", "pause", "other")


@dataclass(slots=True)
class TextDelta:
    """Answer text."""

    text: str
    choice: int = 0  # which of several completions (OpenAI ``n`` > 1)
    type: str = "text"


@dataclass(slots=True)
class ThinkDelta:
    """Reasoning text (a thought, never shown as the answer)."""

    text: str
    choice: int = 0  # which of several completions (OpenAI ``n`` > 1)
    type: str = "think"


@dataclass(slots=True)
class Refusal:
    """Text of a refusal the provider marks as such."""

    text: str
    choice: int = 0  # which of several completions (OpenAI ``n`` > 1)
    type: str = "refusal"


@dataclass(slots=True)
class ToolCallStart:
    """A native tool call begins: its index, id and name."""

    index: int
    id: str | None
    name: str | None
    choice: int = 0
    type: str = "tool_call_start"


@dataclass(slots=True)
class ToolCallDelta:
    """A fragment of a native tool call's JSON arguments."""

    index: int
    arguments: str
    type: str = "tool_call_delta"


@dataclass(slots=True)
class ToolCall:
    """A complete tool call (the end of its fragments)."""

    index: int
    id: str | None
    name: str | None
    arguments: Any  # the parsed JSON, or None
    arguments_error: str | None
    raw_arguments: str
    choice: int = 0
    type: str = "tool_call"


@dataclass(slots=True)
class Finish:
    """Why the model stopped: a normalized reason and the provider's own."""

    reason: str  # one of FINISH_REASONS
    raw: Any
    choice: int = 0
    type: str = "finish"


@dataclass(slots=True)
class Usage:
    """Token counts the provider reported. The provider writes them, so a count that is no whole number of zero or
    more (-5, 1.5, true, "12", 1e308) is not a count: it is None, as if not reported. A negative one raised in the
    gateway's metrics and lost the reply's last piece, and a run's token budget would have been given back tokens."""

    input_tokens: int | None
    output_tokens: int | None
    type: str = "usage"

    def __post_init__(self) -> None:
        self.input_tokens = token_count(self.input_tokens)
        self.output_tokens = token_count(self.output_tokens)


MAX_TOKEN_COUNT = 2**53 - 1  # what every JSON reader holds exactly, and a run's events accept as a count


def token_count(reported: object) -> int | None:
    """``reported`` if it is a whole number of tokens (an int, not a bool, from zero to ``MAX_TOKEN_COUNT``); None
    otherwise. A count past it is no count a provider gives: read as one, 10^30 tokens failed the agent's
    attempt inside the rules' 64-bit facts, and 2^63 - 1 every later agent's, since the run's total stayed."""
    if isinstance(reported, int) and not isinstance(reported, bool) and 0 <= reported <= MAX_TOKEN_COUNT:
        return reported
    return None


@dataclass(slots=True)
class ErrorEvent:
    """A provider error inside the stream, classified."""

    error: ErrorRecord
    type: str = "error"


@dataclass(slots=True)
class Truncated:
    """The stream ended without the provider's end marker."""

    detail: str
    type: str = "truncated"


Event = (
    TextDelta
    | ThinkDelta
    | Refusal
    | ToolCallStart
    | ToolCallDelta
    | ToolCall
    | Finish
    | Usage
    | ErrorEvent
    | Truncated
)


def parse_arguments(raw: str) -> tuple[Any, str | None]:
    """(arguments, error). ``""`` is a call without arguments: ``{}``."""
    if raw.strip() == "":
        return {}, None
    try:
        return safejson.loads(raw), None
    except json.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON: {exc.msg} at character {exc.pos}"
    except ValueError as exc:  # nested too deep, or a non-finite number
        return None, f"arguments are not usable JSON: {exc}"


def to_json(event: Event) -> dict[str, Any]:
    """The record printed by ``groundstate providers parse`` (errors flattened, tool calls without fragments)."""
    if isinstance(event, ErrorEvent):
        record = event.error
        return {
            "type": "error",
            "plane": record.plane,
            "retryable": record.retryable,
            "retry_after_s": record.retry_after_s,
            "status": record.status,
            "code": record.code,
            "message": record.message,
        }
    if isinstance(event, ToolCall):
        return {
            "type": "tool_call",
            "id": event.id,
            "name": event.name,
            "arguments": event.arguments,
            "arguments_error": event.arguments_error,
            **({"choice": event.choice} if event.choice else {}),
        }
    out = asdict(event)
    out = {"type": out.pop("type"), **out}
    if out.get("choice") == 0:  # only streams with several completions say which one an event belongs to
        del out["choice"]
    return out


def merge_deltas(events: list[Event]) -> list[Event]:
    """Consecutive text, think and refusal deltas joined; tool-call fragments dropped (the ToolCall has them)."""
    out: list[Event] = []
    for event in events:
        if isinstance(event, ToolCallStart | ToolCallDelta):
            continue
        last = out[-1] if out else None
        if isinstance(event, TextDelta | ThinkDelta | Refusal):
            if type(last) is type(event) and last.choice == event.choice:
                last.text += event.text
                continue
            event = type(event)(event.text, event.choice)
        out.append(event)
    return out
