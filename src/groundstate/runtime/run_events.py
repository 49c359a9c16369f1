"""The event types a run emits. Every one of them is really emitted by the runtime (a test checks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

RUN_CREATED = "RunCreated"
RUN_STARTED = "RunStarted"
NODE_CREATED = "NodeCreated"
AGENT_STARTED = "AgentStarted"
TOOL_CALL = "ToolCall"
TOOL_RESULT = "ToolResult"
AGENT_COMPLETED = "AgentCompleted"
AGENT_FAILED = "AgentFailed"
AGENT_SKIPPED = "AgentSkipped"
APPROVAL_REQUESTED = "ApprovalRequested"
APPROVAL_DECIDED = "ApprovalDecided"
RUN_RESUMED = "RunResumed"
RUN_COMPLETED = "RunCompleted"
RUN_FAILED = "RunFailed"
RUN_ABORTED = "RunAborted"
POLICY_REPINNED = "PolicyRepinned"
SHADOW_DISAGREED = "ShadowDisagreed"  # [policy] shadow would have decided a checkpoint otherwise (never obeyed)

EVENT_TYPES = (
    RUN_CREATED, RUN_STARTED, NODE_CREATED, AGENT_STARTED, TOOL_CALL, TOOL_RESULT, AGENT_COMPLETED, AGENT_FAILED,
    AGENT_SKIPPED, APPROVAL_REQUESTED, APPROVAL_DECIDED, RUN_RESUMED, RUN_COMPLETED, RUN_FAILED, RUN_ABORTED,
    POLICY_REPINNED, SHADOW_DISAGREED,
)  # fmt: skip


def mangle_name(event_type: str) -> str:
    """``AgentFailed`` → ``/agent_failed``: how policy and cortex patterns name an event type."""
    out = "".join("_" + c.lower() if c.isupper() else c for c in event_type).lstrip("_")
    return "/" + out


@dataclass(frozen=True)
class Event:
    """One event of a run's log: its run, sequence number, type, agent, payload, time and actor."""

    run_id: str
    seq: int  # 1, 2, … within the run
    type: str
    agent: str | None
    payload: dict[str, Any] = field(default_factory=dict)
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    actor: str = "runtime"

    def to_json(self) -> dict[str, Any]:
        """The event as printed by ``runs show --events`` and served by the API."""
        return {"run_id": self.run_id, "seq": self.seq, "type": self.type, "agent": self.agent,
                "payload": self.payload, "at": self.at.isoformat(), "actor": self.actor}  # fmt: skip
