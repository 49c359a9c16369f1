"""What one driver holds for one run it drives: the workflow, the run's guards, its pinned policy and limits, its
backends, its MCP tools, the writer of its events — built once per segment (``Runtime._context``) and handed to
each part of the driving (the attempt, the conversation, the tool round)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..config import Price
from ..kernel import KernelConfig
from .backends import Backend
from .conversation import ModelRounds
from .flows import RunFlows
from .mcp_tools import McpTools
from .policy import PinnedPolicy
from .readiness import Readiness
from .recordings import RunRecording
from .reported import ReportedGuards
from .run_log import RunLog
from .workflow import Workflow


@dataclass(frozen=True)
class Answered:
    """What an attempt's ending event says of its answer only when there is something to say: the model that
    answered when a fallback did (with the models tried), and how many settled actions retention archived."""

    KEYS: ClassVar[tuple[str, ...]] = ("model", "fallbacks", "archived")
    model: str | None = None
    fallbacks: list[Any] = field(default_factory=list)
    archived: int | None = None


@dataclass(frozen=True)
class Said:
    """What an attempt had said when a breaker tripped: its surface answer and thinking, what it cost, its hard
    error, who answered, and what its packets' validation dropped — written with the pause (``AgentFailed``,
    ``ApprovalRequested``)."""

    output: str = ""
    thinking: str = ""
    usage: dict[str, float] | None = None
    error: str | None = None
    answered: Answered = field(default_factory=Answered)
    warnings: list[str] = field(default_factory=list)


NOTHING_SAID = Said()  # a pause before the model was asked (pre-flight, a resume with calls in doubt)


@dataclass
class RunContext:
    """One driven run, as its driver holds it for one segment."""

    run_id: str
    workflow: Workflow
    guards: ReportedGuards  # the run's guard kernel, each report recorded (reported.py)
    workspace: Path
    recordings: Path
    recording: RunRecording  # the run's one .sigil file and its index (runtime/recordings.py)
    run_model: str  # the run's --model: the agents' model unless they or the workflow name another
    holder: str  # this driver's lease on the run; every event it appends names it
    policy: PinnedPolicy  # the guard rules and cortex patterns the run was created under
    limits: KernelConfig  # the limits it was created under (pinned with its policy)
    backends: dict[str | None, Backend] = field(default_factory=dict)  # by model spec; None: the run's model
    models: dict[str, str] = field(default_factory=dict)  # agent -> the configuration's model, as recorded
    fallback: list[str] = field(default_factory=list)  # the configuration's fallback models, as recorded
    credentials: frozenset[str] = frozenset()  # endpoints (URLs) the run's record grants GROUNDSTATE_API_KEY to
    prices: dict[str, Price] = field(default_factory=dict)  # the price table, as recorded
    mcp: McpTools | None = None  # the connected MCP servers, when the workflow's agents use MCP tools
    described: dict[str, str] = field(default_factory=dict)  # MCP tools' descriptions, for the prompts
    flows: RunFlows | None = None  # where each value of a tool call came from (runtime/flows.py)
    readiness: Readiness = field(default_factory=Readiness)  # which pending agents may start (runtime/readiness.py)
    log: RunLog = field(init=False)  # the one writer of the run's events (runtime/run_log.py)
    rounds: ModelRounds = field(init=False)  # the conversations' rounds with the model (runtime/conversation.py)
