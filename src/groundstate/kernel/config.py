"""The kernel's configuration in the seed's shape (``core_limits``, ``shard_profiles``), enforced, not advisory.

- ``max_facts_in_kernel``: a transaction that would exceed it is refused (KernelLimitError), nothing applied.
- ``max_derived_facts_limit``: the engine's created-fact limit for one evaluation; exceeding it rolls back.
- ``max_action_log``: how many action envelopes stay in the kernel before retention moves them to cold storage.
- shard profiles: executors run under ``max_execution_time_sec``; ``max_context_tokens`` bounds prompt text.
"""

from __future__ import annotations

from ..config import DEFAULT_SHARDS, CoreLimits, KernelConfig, ShardProfile
from ..errors import LimitError

__all__ = ["DEFAULT_SHARDS", "ContextBudgetError", "CoreLimits", "KernelConfig", "ShardProfile", "check_context"]


class ContextBudgetError(LimitError, ValueError):
    """Text for a shard's prompt exceeds its context budget."""


def check_context(profile: ShardProfile, text: str, chars_per_token: float = 4.0) -> None:
    """Refuse prompt text longer than the shard's budget (estimated at ``chars_per_token``)."""
    estimate = int(len(text) / chars_per_token)
    if estimate > profile.max_context_tokens:
        raise ContextBudgetError(
            f"about {estimate} tokens exceed the shard's context budget of {profile.max_context_tokens} tokens"
        )
