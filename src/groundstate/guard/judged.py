"""A kernel that judges one thing at a time — a tools/call, a reply — over rule files alone (``shipped=False``):
each thing's facts replace the previous one's in one transaction, so the rules see exactly one and the kernel does
not grow with the traffic."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..kernel import Kernel

Facts = list[tuple[str, tuple[Any, ...]]]


class OneAtATime:
    """The rules in ``sources`` in a kernel of their own; ``judge(facts)`` makes ``facts`` the current thing's."""

    def __init__(self, sources: list[Path], prefix: str) -> None:
        self._workspace = tempfile.TemporaryDirectory(prefix=prefix)  # the kernel needs a workspace; it is unused
        self.kernel = Kernel(Path(self._workspace.name), extra_sources=sources, shipped=False)
        self._previous: Facts = []  # the last thing's facts, retracted with the next

    def judge(self, facts: Facts) -> None:
        """Retract the previous thing's facts and assert these, in one evaluation."""
        with self.kernel.transaction() as tx:
            for predicate, row in self._previous:
                tx.retract(predicate, row)
            for predicate, row in facts:
                tx.assert_(predicate, row)
        self._previous = facts
