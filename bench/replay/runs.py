"""How long ``groundstate policy replay --run`` takes: a run of N instant agents (each answers at once with a valid
envelope: no model) driven by the runtime, which records every report to its guards as it goes (two checkpoints an
agent: pre-flight and the end of its attempt), then re-decided under a candidate that pauses every tenth agent.
The flips are checked against the number expected; the target shared with the MCP guard's replay is 10,000
decisions in under 10 s.

    python bench/replay/runs.py [--agents 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from groundstate.runtime import EventStore, Runtime, guard_rule_parts, replay_runs

sys.path.insert(0, str(Path(__file__).parents[1] / "runtime"))
from run import InstantBackend, layered  # the runtime benchmark's instant agent and DAG

CANDIDATE = ('needs_approval(R, A, /quality, "every tenth agent is looked at") :- finished(R, A), '
             ':string:ends_with(A, "0").\n')  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=5000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = EventStore(f"sqlite:///{Path(folder) / 'runs.db'}")
        runtime = Runtime(store, Path(folder), backend=InstantBackend(), concurrency=16)  # type: ignore[arg-type]
        run_id = runtime.create(layered(options.agents), "layered.yaml", "instant")
        started = time.perf_counter()
        state = asyncio.run(runtime.drive(run_id))
        driving = time.perf_counter() - started
        assert state.status == "completed", state.status
        reports = len(store.guard_reports(run_id))
        candidate = Path(folder) / "candidate.mg"
        candidate.write_text(CANDIDATE)
        started = time.perf_counter()
        found = replay_runs(store, [run_id], guard_rule_parts([candidate]))
        took = time.perf_counter() - started
    expected = sum(1 for i in range(options.agents) if str(i).endswith("0"))
    flipped = {flip.agent for flip in found.flips}
    assert len(flipped) == expected and not found.unreadable, (len(flipped), expected, found.unreadable[:3])
    print(f"{options.agents} agents driven in {driving:.2f} s, {reports} reports recorded")
    print(f"{found.replayed} checkpoints replayed in {took:.2f} s ({took / max(found.replayed, 1) * 1000:.2f} ms "
          f"each), {len(found.flips)} would flip ({len(flipped)} agents)")  # fmt: skip


if __name__ == "__main__":
    main()
