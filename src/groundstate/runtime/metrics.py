"""The runtime's Prometheus metrics, in the same registry as the kernel's (seed 004, appendix D), so one scrape
of ``/metrics`` shows both: runs by how they ended, pauses by category, tool calls by decision, and every model
call, provider error and token by model and provider."""

from __future__ import annotations

from prometheus_client import Counter

from ..kernel import Metrics
from ..providers import ProviderMetrics
from . import run_events as ev

_ENDED = {ev.RUN_COMPLETED: "completed", ev.RUN_FAILED: "failed", ev.RUN_ABORTED: "aborted"}


class RunMetrics:
    """Counters fed by the run's events (``observe``) and by the model calls (``providers``)."""

    def __init__(self, kernel: Metrics) -> None:
        registry = kernel.registry
        self.kernel = kernel
        self.providers = ProviderMetrics(registry)
        self.runs = Counter("groundstate_runs", "Runs created and how they ended (created, completed, failed, "
                            "aborted).", ["status"], registry=registry)  # fmt: skip
        self.pauses = Counter("groundstate_pauses", "Pauses for the operator by category (safety, quality).",
                              ["category"], registry=registry)  # fmt: skip
        self.tool_calls = Counter("groundstate_tool_calls", "Tool calls agents requested, by tool and decision.",
                                  ["tool", "decision"], registry=registry)  # fmt: skip
        self.segments = Counter("groundstate_segments", "Segments of runs this process drove (until a pause, the "
                                "end or a failure), by the run's status after it.", ["status"],
                                registry=registry)  # fmt: skip
        self.decisions = Counter("groundstate_decisions", "Operator decisions (retry, skip, abort).", ["decision"],
                                 registry=registry)  # fmt: skip
        self.shadow = Counter("groundstate_run_shadow_disagreements", "Checkpoints of runs the shadow policy "
                              "([policy] shadow) would have decided otherwise, by the decision made and the "
                              "shadow's (go, pause, deny, error).", ["decision", "shadow"], registry=registry)

    def observe(self, event: ev.Event) -> None:
        """Count what ``event`` says happened."""
        p = event.payload
        if event.type == ev.RUN_CREATED:
            self.runs.labels("created").inc()
        elif event.type in _ENDED:
            self.runs.labels(_ENDED[event.type]).inc()
        elif event.type == ev.APPROVAL_REQUESTED:
            self.pauses.labels(str(p.get("category"))).inc()
        elif event.type == ev.TOOL_RESULT:
            self.tool_calls.labels(str(p.get("tool")), str(p.get("decision") or "none").lstrip("/")).inc()
        elif event.type == ev.APPROVAL_DECIDED:
            self.decisions.labels(str(p.get("decision"))).inc()
        elif event.type == ev.SHADOW_DISAGREED:
            self.shadow.labels(str(p.get("decision")), str(p.get("shadow"))).inc()

    def render(self) -> str:
        """Every metric (the kernel's and the runtime's) in the Prometheus text format."""
        return self.kernel.render()
