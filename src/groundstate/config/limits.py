"""Limits in the seed's shape (``core_limits``, ``shard_profiles``): the ``[limits]`` of the project configuration
and the kernel's own JSON configuration. The kernel and the runtime enforce them; here they are only described."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator


class CoreLimits(BaseModel):
    """Hard limits of the kernel core, read from the kernel configuration."""

    model_config = ConfigDict(extra="forbid")

    max_total_memory_mb: int = Field(4096, gt=0)
    max_concurrent_shards: int = Field(8, gt=0)
    max_facts_in_kernel: int = Field(200_000, gt=0)
    max_derived_facts_limit: int = Field(100_000, gt=0)
    max_action_log: int = Field(500, gt=0)
    max_output_chars: int = Field(65_536, gt=0)


class ShardProfile(BaseModel):
    """How one kind of shard runs: its executors' limits and its prompt's context budget."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)  # None: the model's own default
    max_context_tokens: int = Field(32_000, gt=0)
    max_execution_time_sec: float = Field(60.0, gt=0)
    max_facts_in_shard_kernel: int = Field(50_000, gt=0)
    max_memory_mb: int = Field(512, gt=0)


class ContextWindow(BaseModel):
    """How an agent's context window (its shard profile's ``max_context_tokens``) is shared: the reserves are kept
    free for the answer and for later rounds' tool results; upstream outputs get what the prompt leaves of the rest."""

    model_config = ConfigDict(extra="forbid")

    reserve_output_pct: int = Field(25, ge=0, le=90)
    reserve_tools_pct: int = Field(25, ge=0, le=90)

    @model_validator(mode="after")
    def _room_left(self) -> ContextWindow:
        if self.reserve_output_pct + self.reserve_tools_pct > 90:
            raise ValueError("the reserves together may take at most 90 percent of the window")
        return self


DEFAULT_SHARDS = ("main", "coder", "tester", "reviewer", "researcher")


class KernelConfig(BaseModel):
    """The kernel's configuration: core limits and a profile per shard type."""

    model_config = ConfigDict(extra="forbid")

    core_limits: CoreLimits = Field(default_factory=CoreLimits)
    shard_profiles: dict[str, ShardProfile] = Field(default_factory=lambda: {s: ShardProfile() for s in DEFAULT_SHARDS})
    context_window: ContextWindow = Field(default_factory=ContextWindow)

    def shard(self, shard_type: str) -> ShardProfile:
        """The profile for ``shard_type``; the ``main`` profile for shard types without one."""
        return self.shard_profiles.get(shard_type) or self.shard_profiles.get("main") or ShardProfile()

    @classmethod
    def load(cls, path: str | Path) -> KernelConfig:
        """The configuration in the JSON file at ``path`` (validated; unknown keys refused)."""
        return cls.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
