"""The events a run emits, one frozen model per event type (every one of them really emitted: a test checks).

A run's log stores each event as its type's name, its agent and its payload as a JSON object. The payload is the
event's model, dumped with the keys it was given and no others (``EventBody.to_payload``): a key a writer leaves out
stays out, so a log written before this module typed its events loads, replays and dumps to the same JSON (the
fixtures in ``tests/runtime/fixtures`` were written by the release before). Reading is strict: a value of the wrong
type (a string where a number was written, a number for a string) or a missing key the event needs is refused, and
the store reports the log as corrupt naming the run and the event. A key no model names — one an older release
wrote and this one no longer reads — is kept as it was, never dropped.

The event-type list is derived from the classes (``EVENT_CLASSES``); the state machines (``state.py``) are keyed by
them, and their actions read typed fields that mypy checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .. import safejson
from ..errors import StoreError

Verdict = Literal["retry", "skip", "abort"]  # an operator's decision on a pause
# A number in a payload is one every JSON reader holds exactly (JavaScript's too: at most 2^53 - 1) and never negative:
# an attempt of 10^30 or -1 written into the store is refused when read, as any other misfit is.
SAFE_INTEGER = 2**53 - 1
Count = Annotated[int, Field(ge=0, le=SAFE_INTEGER)]  # how many, or a seq (0: none yet)
Ordinal = Annotated[int, Field(ge=1, le=SAFE_INTEGER)]  # an attempt, an event's seq: from 1
Number = Count | Annotated[float, Field(ge=0, allow_inf_nan=False)]  # a count stays an int; seconds, costs: floats
Usage = dict[str, Number]  # what an attempt cost: input_tokens, output_tokens, seconds, cost


class EventBody(BaseModel):
    """What one event says beyond its run, number, agent, time and actor: its payload, typed."""

    model_config = ConfigDict(frozen=True, strict=True, extra="allow")
    NAME: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.NAME = cls.__name__  # the type's name in the log is its class's

    @model_validator(mode="before")
    @classmethod
    def _whole_characters(cls, data: Any) -> Any:
        """A lone surrogate (half a character: a hostile stream's ``\\ud800`` escape) in any string of the event is
        U+FFFD, as the providers' streams make a split character's unmatched half: it can be neither written as
        UTF-8 nor shown, and a run whose output held one could be driven but not looked at."""
        return _whole(data)

    def leaving_out(self, *names: str) -> Self:
        """This event without the keys ``names`` that are empty (None, "", [] or {}): how a writer says "only when
        there is one" — the key is then absent from the payload, as it was before events were typed."""
        empty = {name for name in names if getattr(self, name) in (None, "", [], {})}
        if not empty:
            return self
        copy = self.model_copy()
        object.__setattr__(copy, "__pydantic_fields_set__", self.model_fields_set - empty)  # frozen: only its keys
        return copy

    def to_payload(self) -> dict[str, Any]:
        """The payload as stored: the keys this event was given (by its writer, or by the log it was read from)."""
        return self.model_dump(exclude_unset=True)


def _whole(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (nested in lists and objects) replaced by U+FFFD."""
    if isinstance(value, str):
        return safejson.whole_characters(value)
    if isinstance(value, dict):
        return {_whole(key): _whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole(item) for item in value]
    return value


class ShownReason(BaseModel):
    """One reason an approval request shows the operator."""

    model_config = ConfigDict(frozen=True, strict=True, extra="allow")
    category: str
    reason: str


# -- the run ---------------------------------------------------------------------------------------------------
class RunCreated(EventBody):
    """A run was created from a workflow; what its configuration chose is recorded here (empty choices left out)."""

    name: str
    workflow: str  # the workflow's YAML text
    model: str | None
    policy: dict[str, Any] | None = None  # the pinned policy (runtime/policy.py)
    models: dict[str, str] = {}  # agent -> model
    budgets: dict[str, Number] = {}
    credentials: list[str] = []  # origins the operator's own --model named
    grants: dict[str, str] = {}  # the --model's URL -> its grant (backends.grant_of), proving the operator named it
    fallback: list[str] = []
    prices: dict[str, dict[str, Number]] = {}


class NodeCreated(EventBody):
    """An agent joined the run (at creation, or spawned by a cortex pattern: then with its spec)."""

    agent: str
    spec: dict[str, Any] | None = None


class RunStarted(EventBody):
    """A driver started the run."""

    model: str | None = None
    driver: str | None = None


class RunResumed(EventBody):
    """A driver resumed the run; the agents it interrupted mid-attempt run again."""

    restarted: list[str] = []
    driver: str | None = None


class RunCompleted(EventBody):
    """Every agent settled: the run's outcome is each agent's status."""

    summary: dict[str, str]
    learned: list[dict[str, Any]] = []  # learned rules whose count this run advanced


class RunFailed(EventBody):
    """The run cannot go on (agents that cannot proceed, or the driver's own error)."""

    error: str


class RunAborted(EventBody):
    """The run ended: by an operator's or a policy's decision, or by cortex interrupts."""

    reason: str
    by: str | None = None
    interrupts: list[dict[str, Any]] = []


class PolicyRepinned(EventBody):
    """The operator pinned the run to another policy, naming the digest it had."""

    policy: dict[str, Any]
    previous: str | None


class ShadowDisagreed(EventBody):
    """A shadow policy would have decided a checkpoint otherwise (never obeyed)."""

    agent: str | None
    checkpoint: str
    decision: str
    reason: str | None
    shadow: str
    shadow_reason: str | None
    candidate: str


# -- an agent's attempt ----------------------------------------------------------------------------------------
class AgentStarted(EventBody):
    """An attempt of an agent began."""

    attempt: Ordinal
    backend: str | None = None
    instructions: str | None = None
    journal: Count | None = None  # the tool journal's epoch (logs written before the journal: the attempt)


class ToolCall(EventBody):
    """The model asked for a tool call (written before it is judged, let alone run)."""

    tool: str
    target: str = ""
    payload: str = ""  # the call's payload as the model wrote it (``to_payload()`` is the event's)


class ToolResult(EventBody):
    """What became of a ToolCall: the decision on it, and its result when it ran."""

    call: Ordinal  # the ToolCall's seq
    tool: str
    decision: str | None
    status: str | None
    output: str = ""
    reason: str | None = None
    policy: str | None = None  # the pinned policy's digest, on a refusal the rules on flows made
    why: dict[str, Any] | None = None  # that refusal's derivation
    journal: str | None = None  # "replayed": it ran before the driver stopped, this is its recorded result


class AgentCompleted(EventBody):
    """The attempt succeeded."""

    output: str
    status_tag: str | None
    thinking: str = ""
    usage: Usage | None = None
    model: str | None = None  # the model that answered, when a fallback did
    fallbacks: list[Any] = []
    archived: Count | None = None  # settled actions retention moved to cold storage
    memory: list[dict[str, Any]] = []  # the attempt's memory operations
    warnings: list[str] = []  # what its packets' validation dropped or read otherwise ("never block the user")


class AgentFailed(EventBody):
    """The attempt failed (a hard error, or a breaker that tripped)."""

    error: str | None
    recovery_hint: str | None = None
    category: str | None = None
    output: str = ""
    usage: Usage | None = None
    model: str | None = None
    fallbacks: list[Any] = []
    archived: Count | None = None
    warnings: list[str] = []  # what its packets' validation dropped, as AgentCompleted says it


class AgentSkipped(EventBody):
    """The agent will not run (an operator's or a policy's skip)."""

    by: str


class ApprovalRequested(EventBody):
    """A breaker tripped: the run waits for an operator's decision."""

    category: str
    reason: str
    hint: str = ""
    reasons: list[ShownReason] = []
    output: str = ""
    thinking: str = ""
    why: dict[str, Any] | None = None  # the derivation of the reason it leads with
    policy: str | None = None  # the pinned policy's digest
    held_call: Ordinal | None = None  # the ToolCall it holds


class ApprovalDecided(EventBody):
    """An operator (or a policy, on timeout) decided a pause."""

    decision: Verdict
    pause: Ordinal  # the ApprovalRequested's seq
    reason: str = ""
    instructions: str | None = None  # new instructions for the retried agent


EVENT_CLASSES: tuple[type[EventBody], ...] = (
    RunCreated, RunStarted, NodeCreated, AgentStarted, ToolCall, ToolResult, AgentCompleted, AgentFailed,
    AgentSkipped, ApprovalRequested, ApprovalDecided, RunResumed, RunCompleted, RunFailed, RunAborted,
    PolicyRepinned, ShadowDisagreed,
)  # fmt: skip
BY_NAME: dict[str, type[EventBody]] = {kind.NAME: kind for kind in EVENT_CLASSES}
EVENT_TYPES = tuple(BY_NAME)

(RUN_CREATED, RUN_STARTED, NODE_CREATED, AGENT_STARTED, TOOL_CALL, TOOL_RESULT, AGENT_COMPLETED, AGENT_FAILED,
 AGENT_SKIPPED, APPROVAL_REQUESTED, APPROVAL_DECIDED, RUN_RESUMED, RUN_COMPLETED, RUN_FAILED, RUN_ABORTED,
 POLICY_REPINNED, SHADOW_DISAGREED) = EVENT_TYPES  # fmt: skip

Planned = list[tuple[EventBody, str | None]]  # events to append: each body and its agent


class EventMisfit(StoreError, ValueError):
    """A stored event that fits no event model (an unknown type, a payload that is no object, a value of the wrong
    type, a key its type needs missing): the store reports the log as corrupt, naming run and event."""


def body_of(event_type: str, payload: Any) -> EventBody:
    """The typed body of a stored event (EventMisfit saying what does not fit)."""
    kind = BY_NAME.get(event_type)
    if kind is None:
        raise EventMisfit(f"{event_type!r} is not an event type")
    if not isinstance(payload, dict):
        raise EventMisfit(f"its payload is a {type(payload).__name__}, not an object")
    try:
        return kind.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in exc.errors()[:3])
        raise EventMisfit(f"its payload does not fit {event_type}: {problems}") from None


def mangle_name(event_type: str) -> str:
    """``AgentFailed`` → ``/agent_failed``: how policy and cortex patterns name an event type."""
    out = "".join("_" + c.lower() if c.isupper() else c for c in event_type).lstrip("_")
    return "/" + out


@dataclass(frozen=True)
class Event:
    """One event of a run's log: its run, sequence number, typed body, agent, time and actor."""

    run_id: str
    seq: int  # 1, 2, … within the run
    body: EventBody
    agent: str | None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    actor: str = "runtime"

    @classmethod
    def parsed(
        cls, run_id: str, seq: int, event_type: str, agent: str | None, payload: Any, at: datetime, actor: str
    ) -> Event:
        """An event as a log stores it (EventMisfit when it fits no event model)."""
        return cls(run_id, seq, body_of(event_type, payload), agent, at, actor)

    @property
    def type(self) -> str:
        """The event type's name (its body's class)."""
        return self.body.NAME

    @cached_property
    def payload(self) -> dict[str, Any]:
        """The payload as stored (``EventBody.to_payload``): for readers of the JSON (the API, console, patterns)."""
        return self.body.to_payload()

    def to_json(self) -> dict[str, Any]:
        """The event as printed by ``runs show --events`` and served by the API."""
        return {"run_id": self.run_id, "seq": self.seq, "type": self.type, "agent": self.agent,
                "payload": self.payload, "at": self.at.isoformat(), "actor": self.actor}  # fmt: skip
