"""What tracing costs: the MCP guard's decision of one call (``McpPolicy.decide``, the shipped policy) bare, with
tracing off (the guard's ``span`` calls as they run in ``call_tool`` and ``_admit``: each hands back the shared
do-nothing context) and with tracing on (the SDK recording into an in-memory exporter), in alternating rounds; the
p50 of each and what off and on add per call, per round.

    python bench/tracing/run.py [--decisions 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from mcp_types import Tool, ToolAnnotations
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from groundstate import tracing
from groundstate.guard import McpPolicy

TOOLS = [Tool(name="get_current_time", input_schema={"type": "object"},
              annotations=ToolAnnotations(read_only_hint=True))]  # fmt: skip


def traced_decision(policy: McpPolicy) -> None:
    """One decision inside the two spans the guard opens for it (its call, its decision), as the guard does."""
    with tracing.span("tools/call time__get_current_time", {"mcp.method.name": "tools/call"}, kind="server") as call:
        with tracing.span("decide", {"gen_ai.tool.name": "time/get_current_time"}) as deciding:
            verdict = policy.decide("time", "get_current_time", {"timezone": "UTC"}, client="bench")
            tracing.note(deciding, groundstate__decision=verdict.decision)
        tracing.note(call, groundstate__decision=verdict.decision)


def timed(decide: Callable[[], None], count: int) -> float:
    """The p50 of ``count`` calls of ``decide``, in microseconds."""
    samples = []
    for _ in range(count):
        started = time.perf_counter_ns()
        decide()
        samples.append((time.perf_counter_ns() - started) / 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    policy = McpPolicy()
    policy.add_tools("time", TOOLS)
    exporter = InMemorySpanExporter()
    bare = lambda: policy.decide("time", "get_current_time", {"timezone": "UTC"}, client="bench")  # noqa: E731
    with_spans = lambda: traced_decision(policy)  # noqa: E731
    print("round  bare p50 µs  off p50 µs  on p50 µs  off adds µs  on adds µs")
    for number in range(1, args.rounds + 1):
        tracing.off()
        base, off = timed(bare, args.decisions), timed(with_spans, args.decisions)
        provider = tracing.use(SimpleSpanProcessor(exporter))
        on = timed(with_spans, args.decisions)
        tracing.off()
        provider.shutdown()
        exporter.clear()
        print(f"{number:>5}  {base:>11.1f}  {off:>10.1f}  {on:>9.1f}  {off - base:>11.1f}  {on - base:>10.1f}")


if __name__ == "__main__":
    main()
