"""groundstate.runtime — RARO: workflows of agents as a DAG, guards that pause for an operator, durable runs.

runtime = Runtime(EventStore(default_db_url()), home())
run_id = runtime.create(workflow_yaml, "flow.yaml", "local")
state = asyncio.run(runtime.drive(run_id))      # completed, or paused awaiting an operator's decision
runtime.decide(run_id, "retry")                 # retry, skip or abort

The public face: the runtime and its decisions, run state and its statuses, the event store with its errors, the
event log's vocabulary, workflows, model backends, cortex patterns, and the terminal views the CLI and console share.
"""

from ..errors import StoreError
from .attempts import Attempt, attempts_of
from .backends import HTTPBackend, LocalBackend, ModelSpecError, Piece, Signals, check_model_spec, make_backend
from .configured import configured_runtime
from .cortex import CortexError, Pattern, load_patterns
from .decisions import DECISIONS, DecisionConflict, DecisionError, decision_events, repin_events
from .display import approval_card, dag_view, usage_line
from .executors import Executor, InProcessExecutor, RunExecutorError, open_executor
from .flows import RunFlows, natures
from .guards import Answer, GuardKernel, RuleOrigins, guard_rule_parts, guard_rules
from .home import default_db_url, home
from .pauses import age, current_instructions, pause_json, pauses_json
from .policy import PinnedPolicy, PolicyPinError
from .recordings import RunRecording, recorded_answers, recording_index
from .replay import RunFlip, RunReplay, replay_reports, replay_runs
from .reported import REPLAY_TIME_LIMIT_S, SHADOW_TIME_LIMIT_S
from .run_events import (
    AGENT_COMPLETED,
    AGENT_FAILED,
    AGENT_SKIPPED,
    AGENT_STARTED,
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    EVENT_TYPES,
    NODE_CREATED,
    POLICY_REPINNED,
    RUN_ABORTED,
    RUN_COMPLETED,
    RUN_CREATED,
    RUN_FAILED,
    RUN_RESUMED,
    RUN_STARTED,
    SHADOW_DISAGREED,
    TOOL_CALL,
    TOOL_RESULT,
    Event,
)
from .runner import HELD_FOR_OPERATOR, Runtime
from .state import (
    ABORTED,
    AWAITING_APPROVAL,
    COMPLETED,
    FAILED,
    FINISHED,
    NODE_EDGES,
    PAUSED,
    PENDING,
    RUN_EDGES,
    RUNNING,
    SKIPPED,
    SUCCEEDED,
    TERMINAL,
    EventRefused,
    Invocation,
    NodeStatus,
    Pause,
    RunEnded,
    RunState,
    RunStatus,
)
from .store import INTERRUPTED, EventStore, LeaseHeld, LeaseLost, StoreCorrupt, UnknownRun
from .terminal import Autopilot, TerminalDriver, check_decision_options, say
from .workflow import AgentSpec, Role, Workflow, WorkflowError, load_workflow, parse_workflow, workflow_of

__all__ = [
    "ABORTED",
    "AGENT_COMPLETED",
    "AGENT_FAILED",
    "AGENT_SKIPPED",
    "AGENT_STARTED",
    "APPROVAL_DECIDED",
    "APPROVAL_REQUESTED",
    "AWAITING_APPROVAL",
    "COMPLETED",
    "DECISIONS",
    "EVENT_TYPES",
    "FAILED",
    "FINISHED",
    "HELD_FOR_OPERATOR",
    "INTERRUPTED",
    "NODE_CREATED",
    "NODE_EDGES",
    "PAUSED",
    "PENDING",
    "POLICY_REPINNED",
    "REPLAY_TIME_LIMIT_S",
    "RUNNING",
    "RUN_ABORTED",
    "RUN_COMPLETED",
    "RUN_CREATED",
    "RUN_EDGES",
    "RUN_FAILED",
    "RUN_RESUMED",
    "RUN_STARTED",
    "SHADOW_DISAGREED",
    "SHADOW_TIME_LIMIT_S",
    "SKIPPED",
    "SUCCEEDED",
    "TERMINAL",
    "TOOL_CALL",
    "TOOL_RESULT",
    "AgentSpec",
    "Answer",
    "Attempt",
    "Autopilot",
    "CortexError",
    "DecisionConflict",
    "DecisionError",
    "Event",
    "EventRefused",
    "EventStore",
    "Executor",
    "GuardKernel",
    "HTTPBackend",
    "InProcessExecutor",
    "Invocation",
    "LeaseHeld",
    "LeaseLost",
    "LocalBackend",
    "ModelSpecError",
    "NodeStatus",
    "Pattern",
    "Pause",
    "Piece",
    "PinnedPolicy",
    "PolicyPinError",
    "Role",
    "RuleOrigins",
    "RunEnded",
    "RunExecutorError",
    "RunFlip",
    "RunFlows",
    "RunRecording",
    "RunReplay",
    "RunState",
    "RunStatus",
    "Runtime",
    "Signals",
    "StoreCorrupt",
    "StoreError",
    "TerminalDriver",
    "UnknownRun",
    "Workflow",
    "WorkflowError",
    "age",
    "approval_card",
    "attempts_of",
    "check_decision_options",
    "check_model_spec",
    "configured_runtime",
    "current_instructions",
    "dag_view",
    "decision_events",
    "default_db_url",
    "guard_rule_parts",
    "guard_rules",
    "home",
    "load_patterns",
    "load_workflow",
    "make_backend",
    "natures",
    "open_executor",
    "parse_workflow",
    "pause_json",
    "pauses_json",
    "recorded_answers",
    "recording_index",
    "repin_events",
    "replay_reports",
    "replay_runs",
    "say",
    "usage_line",
    "workflow_of",
]
