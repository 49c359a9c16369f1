"""Cortex patterns: typed event triggers with Mangle conditions, compiled into policy rules.

```json
{"id": "guard_file_deletion", "name": "File Deletion Guard", "trigger_event": "ToolCall",
 "condition": "tool_call(Run, Agent, Seq, /delete_file, _)", "category": "safety",
 "action": {"RequestApproval": {"reason": "The agent asked to delete a file."}}}
```

``condition`` is ``*`` or a Mangle body over the run's event facts, in which ``Run``, ``Agent`` and ``Seq`` are the
triggering event's. Actions: ``RequestApproval`` derives ``needs_approval/4``; ``Interrupt`` derives
``interrupt/3`` (the run is aborted); ``SpawnAgent`` derives ``spawn_agent/3`` (the runtime adds the agent).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import ConfigurationError
from .run_events import EVENT_TYPES, mangle_name
from .workflow import AgentSpec


class RequestApproval(BaseModel):
    reason: str


class Interrupt(BaseModel):
    reason: str


class SpawnAgent(BaseModel):
    agent: AgentSpec


class Action(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    request_approval: RequestApproval | None = Field(None, alias="RequestApproval")
    interrupt: Interrupt | None = Field(None, alias="Interrupt")
    spawn_agent: SpawnAgent | None = Field(None, alias="SpawnAgent")

    @model_validator(mode="after")
    def _exactly_one(self) -> Action:
        if sum(x is not None for x in (self.request_approval, self.interrupt, self.spawn_agent)) != 1:
            raise ValueError("an action is exactly one of RequestApproval, Interrupt, SpawnAgent")
        return self


class Pattern(BaseModel):
    """A cortex pattern: when its condition holds, it spawns an agent or interrupts the run."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str
    trigger_event: str
    condition: str = "*"
    category: Literal["safety", "quality"] = "quality"
    action: Action

    @model_validator(mode="after")
    def _known_trigger(self) -> Pattern:
        if self.trigger_event not in EVENT_TYPES:
            raise ValueError(f"trigger_event {self.trigger_event!r} is not an event type ({', '.join(EVENT_TYPES)})")
        return self


class CortexError(ConfigurationError, ValueError):
    """A cortex patterns file that cannot be used; the message names the file and what is wrong."""


def default_patterns_path() -> Path:
    return Path(str(resources.files("groundstate.runtime") / "defaults" / "cortex_patterns.json"))


def load_patterns(*paths: str | Path, disabled: Sequence[str] = ()) -> list[Pattern]:
    """The shipped cortex patterns, followed by those in the JSON files at ``paths`` (added, never replacing one:
    a user file cannot silently disable the deletion guard), without the shipped ones named in ``disabled`` (the
    configuration's explicit ``policy.disable_patterns``); CortexError on a bad file, a repeated id or a disabled id
    that names no shipped pattern."""
    patterns = _read_patterns(default_patterns_path())
    unknown = sorted(set(disabled) - {p.id for p in patterns})
    if unknown:
        raise CortexError(f"policy.disable_patterns: {', '.join(unknown)}: no shipped pattern has that id (shipped: "
                          f"{', '.join(p.id for p in patterns)})")  # fmt: skip
    patterns = [p for p in patterns if p.id not in disabled]
    for path in paths:
        own = _read_patterns(Path(path))
        clash = sorted({p.id for p in own} & {p.id for p in patterns})
        if clash:
            raise CortexError(f"{path}: {', '.join(clash)}: already the id of a loaded pattern; give yours another id")
        patterns += own
    return patterns


def _read_patterns(source: Path) -> list[Pattern]:
    try:
        data: Any = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CortexError(f"{source}: cannot read the cortex patterns: {exc}") from None
    if not isinstance(data, list):
        raise CortexError(f"{source}: a cortex patterns file is a JSON list of patterns")
    try:
        patterns = [Pattern.model_validate(item) for item in data]
    except ValidationError as exc:
        raise CortexError(f"{source}: {exc}") from None
    ids = [p.id for p in patterns]
    if len(set(ids)) != len(ids):
        raise CortexError(f"{source}: pattern ids must be unique")
    return patterns


def compile_patterns(patterns: list[Pattern]) -> str:
    """Mangle rules, one per pattern, each commented with the id of the pattern it comes from. Only the operator's
    own condition text and validated tokens go into the rules — the id (``[a-z][a-z0-9_]*``), the category (safety or
    quality) and the trigger (a known event type); a pattern's name and reason are values, reported as
    ``cortex_reason`` facts (``pattern_reasons``), never spliced into rule text. Clauses end with " ." because a name
    constant at the end of a body would otherwise swallow the period."""
    lines = ["# compiled from cortex patterns; each reason is a cortex_reason fact",
             "Decl cortex_reason(Pattern, Reason) bound [/string, /string]."]  # fmt: skip
    for p in patterns:
        body = f"event(Run, Seq, {mangle_name(p.trigger_event)}, Agent)"
        if p.condition.strip() != "*":
            body += ", " + p.condition.strip().rstrip(".")
        lines.append(f"# {p.id}")
        if p.action.request_approval is not None:
            lines.append(f'pattern_approval(Run, Agent, /{p.category}, R) :- {body}, cortex_reason("{p.id}", R) .')
        elif p.action.interrupt is not None:
            lines.append(f'interrupt(Run, Agent, R) :- {body}, cortex_reason("{p.id}", R) .')
        elif p.action.spawn_agent is not None:
            lines.append(f'spawn_agent(Run, "{p.id}", Agent) :- {body} .')
    return "\n".join(lines) + "\n"


def pattern_reasons(patterns: list[Pattern]) -> list[tuple[str, str]]:
    """(pattern id, reason) for every pattern that gives one: the ``cortex_reason`` facts its rule reads."""
    reasons = []
    for p in patterns:
        given = p.action.request_approval or p.action.interrupt
        if given is not None:
            reasons.append((p.id, given.reason))
    return reasons
