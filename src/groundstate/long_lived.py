"""What a long-lived groundstate process does once it has started: the objects its start built (its imports —
pydantic's models, the SDKs' modules —, a policy's engine, the upstreams' tool schemas) live as long as it does,
so they are moved out of the garbage collector's reach (``gc.freeze``). Otherwise every full collection, which a
request's or a node's allocations set off every few hundred of them, walks all of it again.

Measured (docs/benchmarks.md): a forwarded MCP call 2.9 ms instead of 3.9 in-process; the gateway's CPU per
100-chunk stream 0.42–0.45 ms instead of 0.50–0.63; a workflow node 0.49–0.51 ms instead of 0.58–0.60.

Only the commands that own their process call it (``mcp serve``, ``gateway``, ``serve``, ``demo``, ``run``,
``runs resume``): a library call must not freeze its host's objects, whose cycles would then never be freed."""

from __future__ import annotations

import gc


def started() -> None:
    """The process has started: what it built so far is kept out of every later collection."""
    gc.collect()
    gc.freeze()
