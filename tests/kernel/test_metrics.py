"""The kernel's prometheus metrics reflect what really happened."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from groundstate.kernel import Kernel, Request, Shards, VirtualStore
from groundstate.packets import PacketGate, parse_output

PACKET = {"control_packet": {"intent_classification": {"category": "/instruction", "verb": "/do",
                                                       "confidence": 0.75}}}  # fmt: skip


def samples(shards: Shards) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(shards.metrics.render()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_follow_the_turns(tmp_path: Path) -> None:
    extra = tmp_path / "teleport.mg"
    extra.write_text("known_action(/teleport).\n")  # known, permitted, but no route: a routing error
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a")
    kernel = Kernel(workspace, extra_sources=[extra])
    shards = Shards(kernel, VirtualStore(kernel.workspace))
    fenced = "```json\n" + json.dumps(PACKET) + "\n```"
    result = parse_output(fenced, kernel.update_validator())
    shards.step(result, [Request("/read_file", "a.txt"), Request("/read_file", "missing.txt"),
                         Request("/teleport", "moon")])  # fmt: skip
    gate = PacketGate(kernel.update_validator())
    gate.feed('{"surface_response": "x"}')
    shards.step_gated(gate.close())

    s = samples(shards)
    read = (("action", "/read_file"), ("executor", "read_file"))
    assert s[("actions_total", (*read, ("status", "success")))] == 1
    assert s[("actions_total", (*read, ("status", "failure")))] == 1
    assert s[("action_success_rate", read)] == 0.5
    assert s[("routing_errors_total", (("action", "/teleport"),))] == 1
    assert s[("stream_aborts_total", ())] == 1
    assert s[("stream_fallback_total", (("how", "fenced"),))] == 1
    assert s[("intent_parse_confidence_count", ())] == 1 and s[("intent_parse_confidence_sum", ())] == 0.75
    assert s[("ooda_phase_current", (("phase", "/observe"),))] == 1
    assert s[("ooda_phase_current", (("phase", "/act"),))] == 0
    assert s[("kernel_eval_duration_ms_count", ())] >= 3
    assert s[("kernel_fact_count_total", (("kind", "base"),))] == kernel.fact_count()
