"""Prometheus metrics for the kernel, the OODA shards and the packet gate (seed 004, appendix D).

Each ``Metrics`` has its own registry, so several kernels in one process do not collide; ``render()`` gives the
text exposition format for a scrape endpoint. groundstate never repairs model output, so the seed's
``gcd_repairs_*`` counters have no counterpart: a bad packet is a validation failure, counted as such.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PHASES = ("/observe", "/decide", "/act")


class Metrics:
    """The kernel's Prometheus metrics (one registry per instance, so tests and runs do not share counts)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.eval_duration = Histogram("kernel_eval_duration_ms", "Kernel evaluation time per transaction (ms).",
                                       buckets=(0.1, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 1000), registry=r)  # fmt: skip
        self.fact_count = Gauge("kernel_fact_count_total", "Facts in the kernel.", ["kind"], registry=r)
        self.phase = Gauge("ooda_phase_current", "1 for the current OODA phase, 0 for the others.", ["phase"],
                           registry=r)  # fmt: skip
        self.confidence = Histogram("intent_parse_confidence", "Intent classification confidence of accepted packets.",
                                    buckets=(0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0), registry=r)  # fmt: skip
        self.stream_aborts = Counter("stream_aborts", "Streams the packet gate aborted.", registry=r)
        self.stream_fallbacks = Counter("stream_fallback", "Outputs parsed with degradation (fence, embedded, surface "
                                        "only).", ["how"], registry=r)  # fmt: skip
        self.validation_failures = Counter("packet_validation_failures", "Rejected packets and dropped updates.",
                                           ["kind"], registry=r)  # fmt: skip
        self.routing_errors = Counter("routing_errors", "Permitted actions without a route.", ["action"], registry=r)
        self.actions = Counter("actions", "Executed actions by outcome.", ["action", "executor", "status"], registry=r)
        self.success_rate = Gauge("action_success_rate", "Share of executed actions that succeeded.",
                                  ["action", "executor"], registry=r)  # fmt: skip
        self._outcomes: dict[tuple[str, str], list[int]] = {}

    def evaluated(self, seconds: float, base: int, derived: int) -> None:
        """Record one evaluation: its duration and the fact counts after it."""
        self.eval_duration.observe(seconds * 1000)
        self.fact_count.labels("base").set(base)
        self.fact_count.labels("derived").set(derived)

    def in_phase(self, phase: str) -> None:
        """Mark ``phase`` as the current OODA phase (1 for it, 0 for the others)."""
        for name in PHASES:
            self.phase.labels(name).set(1 if name == phase else 0)

    def executed(self, action: str, executor: str, ok: bool) -> None:
        """Count an action run by ``executor``, successful or not."""
        self.actions.labels(action, executor, "success" if ok else "failure").inc()
        counts = self._outcomes.setdefault((action, executor), [0, 0])
        counts[0 if ok else 1] += 1
        self.success_rate.labels(action, executor).set(counts[0] / (counts[0] + counts[1]))

    def render(self) -> str:
        """The metrics in the Prometheus text format."""
        return generate_latest(self.registry).decode()
