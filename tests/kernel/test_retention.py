"""Retention over a long synthetic session: the kernel stays bounded, nothing is lost, IDs never repeat."""

from __future__ import annotations

import json
from pathlib import Path

from groundstate.kernel import ColdStorage, CoreLimits, Kernel, KernelConfig, Request, Shards, VirtualStore
from groundstate.packets import parse_output

PACKET = json.dumps({"control_packet": {"intent_classification": {
    "category": "/instruction", "verb": "/do", "target": "codebase", "confidence": 1.0}}})  # fmt: skip


def test_long_session_stays_bounded(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    kernel = Kernel(tmp_path, config=KernelConfig(core_limits=CoreLimits(max_action_log=20)))
    cold = ColdStorage(tmp_path / "cold" / "actions.sqlite")
    shards = Shards(kernel, VirtualStore(kernel.workspace), cold)
    result = parse_output(PACKET, kernel.update_validator())
    counts = []
    waiting = shards.step(result, [Request("/delete_file", "a.txt")])[0].action_id  # waits for approval: kept
    for turn in range(150):
        shards.step(result, [Request("/read_file", "a.txt"), Request("/format_disk", str(turn))])
        counts.append(kernel.fact_count())
    assert len(kernel.query("pending_action(A, T, G, P, M)")) == 20
    assert max(counts[20:]) == min(counts[20:])  # bounded: constant once the bound is reached
    assert kernel.query(f"awaiting_approval({waiting}, R)")  # an action waiting for the user is never archived
    assert cold.count() == 301 - 20
    first = cold.get("/action/2")
    assert first is not None and (first.type, first.decision, first.status, first.output) == (
        "/read_file",
        "/permit",
        "/success",
        "a",
    )
    denied = cold.get("/action/3")
    assert denied is not None and (denied.decision, denied.reason, denied.status) == (
        "/deny",
        "unknown action type",
        None,
    )
    assert any(f.startswith("execution_result(/action/2, /read_file, /success") for f in first.facts)

    reopened = Shards(kernel, VirtualStore(kernel.workspace), ColdStorage(tmp_path / "cold" / "actions.sqlite"))
    [report] = reopened.step(result, [Request("/read_file", "a.txt")])
    assert report.action_id == "/action/302"  # numbering continues past the archive
