"""How much of each upstream agent's output an agent receives: the context window's allocator.

The window is the agent's shard profile's ``max_context_tokens`` (about four characters a token, as
``check_context`` counts). ``context_window.reserve_output_pct`` and ``reserve_tools_pct`` of it stay free for the
answer and for later rounds' tool results; the system prompt, the task and what memory shows take their part of the
rest; the upstream outputs share what is left. They share it fairly: an output shorter than an equal share keeps
all of it and leaves the difference to the others, and only the outputs longer than their share are cut — each to
the same length, with a marker that says so. Every cut is reported, so the guards can see it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ContextWindow, ShardProfile

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Fitted:
    """One upstream output as the agent receives it: its text, and how much of how much was kept."""

    agent: str
    text: str
    kept: int
    total: int

    @property
    def cut(self) -> bool:
        """Whether the output was shortened."""
        return self.kept < self.total


def upstream_room(profile: ShardProfile, window: ContextWindow, prompt_chars: int) -> int:
    """Characters left for upstream outputs, once the reserves and the rest of the prompt have their part."""
    usable = profile.max_context_tokens * CHARS_PER_TOKEN * (100 - window.reserve_output_pct - window.reserve_tools_pct)
    return max(usable // 100 - prompt_chars, 0)


def fit_upstream(outputs: list[tuple[str, str]], room: int) -> list[Fitted]:
    """The outputs cut to share ``room`` characters fairly (see the module docstring), in their order."""
    shares = _shares([len(text) for _, text in outputs], room)
    fitted = []
    for (agent, text), share in zip(outputs, shares, strict=True):
        if share >= len(text):
            fitted.append(Fitted(agent, text, len(text), len(text)))
        else:
            marker = f"\n[groundstate: cut to {share} of {len(text)} characters by the context window]"
            fitted.append(Fitted(agent, text[:share] + marker, share, len(text)))
    return fitted


def _shares(lengths: list[int], room: int) -> list[int]:
    """Water-filling: the largest equal share every output may have within ``room`` (short ones keep all)."""
    shares = [0] * len(lengths)
    waiting = sorted(range(len(lengths)), key=lambda i: lengths[i])
    left = room
    while waiting:
        share = left // len(waiting)
        index = waiting[0]
        if lengths[index] <= share:
            shares[index] = lengths[index]
            left -= lengths[index]
            waiting.pop(0)
            continue
        for index in waiting:
            shares[index] = share
        break
    return shares
