"""groundstate.kernel — the agent kernel: Mangle policy decides, Python reports facts and obeys.

kernel = Kernel("workspace/")
shards = Shards(kernel, VirtualStore(kernel.workspace))
reports = shards.step(parse_output(model_output, kernel.update_validator()))

The public face: the kernel and its transactions, the OODA shards and their requests and reports, the virtual store
and its executors, the workspace, configuration, explanations (``why``), the linter, learned rules, memory, metrics
and retention.
"""

from ..errors import ExecutorError
from .config import ContextBudgetError, CoreLimits, KernelConfig, ShardProfile, check_context
from .executors import EXECUTORS, Action, Context, Outcome
from .executors.http_search import HTTPSearch, SearchError
from .executors.web import CorpusSearch
from .explain import Explanation, explain, fired_rules, why, why_row
from .journaled import JournaledEffects
from .kernel import (
    Frame,
    Kernel,
    KernelLimitError,
    PolicyInvariantError,
    Transaction,
    default_sources,
    load_program,
    update_validator,
)
from .learned import LearnedRule, LearnedRuleError, LearnedRules, count_completed_run
from .lint import Finding
from .lint import lint as lint_policy
from .memory import HashingEmbedder, Memory
from .metrics import Metrics
from .minilm import MiniLMEmbedder
from .ooda import ARGUMENT_IS_PAYLOAD, ActionReport, NotAwaitingApproval, PacketRefused, Request, Shards
from .retention import ArchivedAction, ColdStorage
from .search_backend import configured_search
from .store import VirtualStore
from .workspace import Workspace, WorkspaceError

__all__ = [
    "ARGUMENT_IS_PAYLOAD",
    "EXECUTORS",
    "Action",
    "ActionReport",
    "ArchivedAction",
    "ColdStorage",
    "Context",
    "ContextBudgetError",
    "CoreLimits",
    "CorpusSearch",
    "ExecutorError",
    "Explanation",
    "Finding",
    "Frame",
    "HTTPSearch",
    "HashingEmbedder",
    "JournaledEffects",
    "Kernel",
    "KernelConfig",
    "KernelLimitError",
    "LearnedRule",
    "LearnedRuleError",
    "LearnedRules",
    "Memory",
    "Metrics",
    "MiniLMEmbedder",
    "NotAwaitingApproval",
    "Outcome",
    "PacketRefused",
    "PolicyInvariantError",
    "Request",
    "SearchError",
    "ShardProfile",
    "Shards",
    "Transaction",
    "VirtualStore",
    "Workspace",
    "WorkspaceError",
    "check_context",
    "configured_search",
    "count_completed_run",
    "default_sources",
    "explain",
    "fired_rules",
    "lint_policy",
    "load_program",
    "update_validator",
    "why",
    "why_row",
]
