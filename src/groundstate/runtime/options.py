"""What a runtime reads of its configuration, resolved once when it starts.

A runtime used to read ``ProjectConfig`` wherever it needed a value (a dozen sites across four modules, some of them
deriving the same thing — the endpoints that may receive the provider key — on every call). ``RuntimeOptions`` is
that reading done once: every knob the runtime obeys, with its derived sets, in one frozen object a newcomer can read
top to bottom. Changing the configuration object afterwards changes nothing a runtime does (tested); a new setting
is added here, where ``resolve`` says where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from ..config import KernelConfig, LearnedConfig, McpConfig, Price, ProjectConfig
from .backends import origin_of
from .cortex import load_patterns
from .guards import guard_rules
from .policy import PinnedPolicy
from .workflow import Role


@dataclass(frozen=True)
class RuntimeOptions:
    """Every setting a runtime obeys, resolved from the project configuration and the constructor's arguments."""

    runs_dir: Path  # each run's workspace and recordings
    lease_seconds: float  # a crashed driver's run can be taken over this long after its last renewal
    concurrency: int  # agents of one run at once (at most core_limits.max_concurrent_shards)
    max_rounds: int  # model rounds per attempt (tool calls answered between them)
    limits: KernelConfig  # shard profiles bound each agent's prompt and model calls
    policy: PinnedPolicy  # guards, patterns, roles and limits new runs are pinned to
    shadow_guards: str | None  # [policy] shadow: a candidate's guard rules, decided beside every run driven
    default_model: str | None  # models.default: a run's model when none is given
    fallback: tuple[str, ...]  # models.fallback, in order
    agent_models: MappingProxyType[str, str]  # models.agents: an agent's model by its id
    role_models: MappingProxyType[str, str]  # models.roles: an agent's model by its role's prefix
    configured_models: frozenset[str]  # every model spec the operator's configuration names
    credential_origins: frozenset[str]  # the endpoints that may receive GROUNDSTATE_API_KEY
    budgets: MappingProxyType[str, Any]  # [budgets], recorded in each run at creation
    prices: MappingProxyType[str, Price]  # [prices], by model name
    mcp: McpConfig  # [mcp]: servers, start timeout, labels, the call history a run keeps (a private copy)
    memory_recall: int  # memory.recall: long-term and vector entries shown to an agent (0: none)
    learned: LearnedConfig  # [learned]: the learned rules' file and their quarantine (a private copy)
    self_approval: tuple[str, ...]  # [access] self_approval: accounts that may decide what they asked for
    approval_timeout_sec: float | None  # [approvals] timeout_sec (None: a pause waits for ever)
    approval_default: Literal["skip", "abort"]  # [approvals] default_decision for a timed-out quality pause
    audit_key: bytes | None = None  # [audit] key_env's key, when set: a run's signed head is checked before driving
    audit_required: bool = False  # [audit] sign: a run's head must be signed (and its events linked) to be acted on

    @property
    def roles(self) -> list[Role] | None:
        """The configuration's roles, for workflows that declare none (None: the shipped default roles)."""
        return list(self.policy.roles) if self.policy.roles is not None else None

    @classmethod
    def resolve(
        cls,
        settings: ProjectConfig,
        home: Path,
        *,
        patterns_path: Path | None = None,
        concurrency: int = 4,
        max_rounds: int = 3,
        lease_seconds: float = 30.0,
        limits: KernelConfig | None = None,
    ) -> RuntimeOptions:
        """The options of a runtime with ``settings`` (groundstate.toml) and the constructor's own arguments; a guard
        or pattern file that does not load is refused here, before any run is created or driven."""
        policy = settings.policy
        limits = limits or settings.limits
        guards = guard_rules(policy.guards, policy.disable_guards)
        shadow = guard_rules(policy.shadow, policy.disable_guards) if policy.shadow else None
        roles = [Role(prefix=prefix, **role.model_dump()) for prefix, role in settings.roles.items()] or None
        patterns = load_patterns(*([patterns_path] if patterns_path else []), *policy.patterns,
                                 disabled=policy.disable_patterns)  # fmt: skip
        models = settings.models
        named = [models.default, *models.roles.values(), *models.agents.values(), *models.fallback]
        named += [profile.model for profile in limits.shard_profiles.values()]
        configured = frozenset(spec for spec in named if spec)
        as_specs = [*configured, *(f"openai-chat:endpoint@{endpoint}" for endpoint in models.endpoints)]
        return cls(
            runs_dir=settings.executor.runs_dir or home / "runs",
            lease_seconds=lease_seconds,
            concurrency=concurrency,
            max_rounds=max_rounds,
            limits=limits,
            policy=PinnedPolicy.of(guards, patterns, roles, limits),
            shadow_guards=shadow,
            default_model=models.default,
            fallback=tuple(models.fallback),
            agent_models=MappingProxyType(dict(models.agents)),
            role_models=MappingProxyType(dict(models.roles)),
            configured_models=configured,
            credential_origins=frozenset(o for o in map(origin_of, as_specs) if o is not None),
            budgets=MappingProxyType(settings.budgets.model_dump(exclude_none=True)),
            prices=MappingProxyType({model: price.model_copy() for model, price in settings.prices.items()}),
            mcp=settings.mcp.model_copy(deep=True),
            memory_recall=settings.memory.recall,
            learned=settings.learned.model_copy(deep=True),
            self_approval=tuple(settings.access.self_approval),
            approval_timeout_sec=settings.approvals.timeout_sec,
            approval_default=settings.approvals.default_decision,
            audit_key=settings.audit.verifying_key(),
            audit_required=settings.audit.sign,
        )
