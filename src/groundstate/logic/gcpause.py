"""Pause the cyclic garbage collector while building large acyclic structures.

Parsing and evaluation allocate millions of tuples that can never form cycles; the collector's
repeated scans of them cost as much as the work itself.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
