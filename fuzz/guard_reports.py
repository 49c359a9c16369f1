"""atheris fuzz harness for a run's recorded guard reports (``guard_reports``: whoever can write the store's
database controls them), as ``groundstate policy replay --run`` reads and applies them.

    python fuzz/guard_reports.py fuzz/reports-corpus -atheris_runs=100000

Each input is the body of one report row (bytes; what is not strict JSON is refused by ``safejson`` as the store's
reader refuses it), applied after a segment's start to a kernel under the shipped guard rules. The harness fails on
any exception escaping the replay: every report that does not fit must be "could not be re-decided".
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from groundstate import safejson
    from groundstate.runtime import (
        PinnedPolicy,
        RuleOrigins,
        RunReplay,
        guard_rule_parts,
        parse_workflow,
        replay_reports,
    )

WORKFLOW = parse_workflow("name: fuzz\nagents:\n  - id: writer_a\n    instructions: Write.\n    tools: [write_file]\n")
PARTS = guard_rule_parts([])
POLICY = PinnedPolicy.of("\n".join(text for _, text, _ in PARTS), [])
ORIGINS = RuleOrigins(PARTS)
SCRATCH = Path(tempfile.mkdtemp(prefix="groundstate-fuzz-reports-"))


def test_one_input(data: bytes) -> None:
    try:
        report = safejson.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return
    found = RunReplay()
    reports = [(1, {"m": "begin", "a": ["writer_a"]}), (2, report)]
    replay_reports("run-fuzz", WORKFLOW, POLICY, {}, reports, SCRATCH, ORIGINS, found)
    if found.replayed + len(found.unreadable) > 1:
        raise AssertionError("one report was both re-decided and refused")


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
