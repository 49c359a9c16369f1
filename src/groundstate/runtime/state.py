"""A run's state, derived from its events and from nothing else (so a restart rebuilds it exactly)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import run_events as ev

PENDING, RUNNING, AWAITING_APPROVAL, COMPLETED, FAILED, ABORTED = (
    "pending", "running", "awaiting_approval", "completed", "failed", "aborted",
)  # fmt: skip
SUCCEEDED, PAUSED, SKIPPED = "succeeded", "paused", "skipped"  # invocation states (with pending, running, failed)
FINISHED = (COMPLETED, FAILED, ABORTED)
TERMINAL = (COMPLETED, ABORTED)  # nothing follows these; a failed run may still be resumed


@dataclass
class Invocation:
    agent: str
    status: str = PENDING
    attempts: int = 0
    output: str = ""  # the surface response of the last successful attempt
    thinking: str = ""  # its reasoning traces
    status_tag: str | None = None
    instructions: str | None = None  # the operator's edited instructions, if any
    tools: list[dict[str, Any]] = field(default_factory=list)  # the last attempt's tool calls and results
    error: str | None = None


@dataclass
class Pause:
    agent: str | None
    category: str  # "safety" or "quality"
    reason: str
    hint: str
    seq: int  # the ApprovalRequested event
    others: list[str] = field(default_factory=list)  # further reasons derived at the same checkpoint


@dataclass
class RunState:
    run_id: str
    workflow: str = ""  # the workflow's YAML text, as started
    name: str = ""
    model: str | None = None
    status: str = PENDING
    nodes: dict[str, Invocation] = field(default_factory=dict)
    spawned: list[dict[str, Any]] = field(default_factory=list)  # agents added by cortex patterns
    pauses: list[Pause] = field(default_factory=list)  # approvals waiting, oldest first
    last_seq: int = 0
    outcome: str | None = None

    @property
    def pause(self) -> Pause | None:
        """The approval the operator decides next."""
        return self.pauses[0] if self.pauses else None

    def apply(self, event: ev.Event) -> None:
        self.last_seq = event.seq
        p, node = event.payload, self.nodes.get(event.agent or "")
        if event.type == ev.RUN_CREATED:
            self.workflow, self.name, self.model = p["workflow"], p["name"], p.get("model")
        elif event.type == ev.NODE_CREATED:
            self.nodes[p["agent"]] = Invocation(p["agent"])
            if p.get("spec"):
                self.spawned.append(p["spec"])
        elif event.type in (ev.RUN_STARTED, ev.RUN_RESUMED):
            self.status = RUNNING
            for restarted in p.get("restarted", []):  # interrupted mid-invocation: it runs again
                self.nodes[restarted].status = PENDING
        elif event.type == ev.AGENT_STARTED and node:
            node.status, node.attempts, node.tools, node.error = RUNNING, p["attempt"], [], None
        elif event.type == ev.TOOL_CALL and node:
            node.tools.append({"seq": event.seq, "tool": p["tool"], "target": p.get("target", ""),
                               "payload": p.get("payload", "")})  # fmt: skip
        elif event.type == ev.TOOL_RESULT and node:
            for call in node.tools:
                if call["seq"] == p["call"]:
                    call.update(status=p["status"], output=p.get("output", ""), decision=p.get("decision"),
                                reason=p.get("reason"))  # fmt: skip
        elif event.type == ev.AGENT_COMPLETED and node:
            node.status, node.output, node.status_tag = SUCCEEDED, p["output"], p.get("status_tag")
            node.thinking = p.get("thinking", "")
        elif event.type == ev.AGENT_FAILED and node:
            node.status, node.error = FAILED, p.get("error")
            node.output = p.get("output", node.output)
        elif event.type == ev.AGENT_SKIPPED and node:
            node.status = SKIPPED
        elif event.type == ev.APPROVAL_REQUESTED:
            self.status = AWAITING_APPROVAL
            others = [r["reason"] for r in p.get("reasons", []) if r["reason"] != p["reason"]]
            self.pauses.append(Pause(event.agent, p["category"], p["reason"], p.get("hint", ""), event.seq, others))
            if node:
                node.status = PAUSED
                node.output = p.get("output", node.output)
                node.thinking = p.get("thinking", node.thinking)
        elif event.type == ev.APPROVAL_DECIDED:
            self.pauses = [x for x in self.pauses if x.seq != p["pause"]]
            if node and p["decision"] == "retry":
                node.status = PENDING
                if p.get("instructions"):
                    node.instructions = p["instructions"]
            if not self.pauses and p["decision"] in ("retry", "skip"):
                self.status = RUNNING
        elif event.type == ev.RUN_COMPLETED:
            self.status, self.outcome = COMPLETED, p.get("summary")
        elif event.type == ev.RUN_FAILED:
            self.status, self.outcome = FAILED, p.get("error")
        elif event.type == ev.RUN_ABORTED:
            self.status, self.outcome = ABORTED, p.get("reason")

    @classmethod
    def replay(cls, run_id: str, events: list[ev.Event]) -> RunState:
        state = cls(run_id)
        for event in events:
            state.apply(event)
        return state
