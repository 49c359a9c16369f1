"""A kernel that judges one thing at a time — a tools/call, a reply — over rule files alone (``shipped=False``):
each thing's facts are supposed for the length of its judgement (``Kernel.supposing``), so the rules see exactly one
thing, the kernel never grows with the traffic, and the judgement costs one incremental evaluation from the thing's
own facts — the decision path."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..kernel import Kernel

Facts = list[tuple[str, tuple[Any, ...]]]


class OneAtATime:
    """The rules in ``sources`` in a kernel of their own; ``judging(facts)`` holds while a thing is judged."""

    def __init__(self, sources: list[Path], prefix: str, time_limit: float | None = None) -> None:
        """``time_limit``: seconds one judgement may take (a shadow's, a replay's rules; Engine)."""
        self._workspace = tempfile.TemporaryDirectory(prefix=prefix)  # the kernel needs a workspace; it is unused
        self.kernel = Kernel(Path(self._workspace.name), extra_sources=sources, shipped=False, time_limit=time_limit)

    @contextmanager
    def judging(self, facts: Facts) -> Iterator[Kernel]:
        """The kernel while ``facts`` are the current thing's: read its verdict inside the block."""
        with self.kernel.supposing(facts) as kernel:
            yield kernel
