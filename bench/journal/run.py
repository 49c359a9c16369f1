"""What making a tool call's intent durable costs: one journaled call (intent, effect, result) on the store's
SQLite (WAL, synchronous=NORMAL) with and without ``ToolJournal.durable`` (the WAL fsync between the intent and the
effect), in alternating rounds on the same file system; the median per call of each and their ratio per round.

    python bench/journal/run.py [--calls 300] [--rounds 5] [--dir /path/on/the/disk/you/use]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from groundstate.store import ToolJournal


def per_call(journal: ToolJournal, calls: int, durable: bool, round_number: int) -> float:
    """Median seconds per journaled call."""
    times = []
    for position in range(calls):
        arguments = {"path": f"f{position}.txt", "content": "x"}
        started = time.perf_counter()
        journal.begin(f"bench:{round_number}:{durable}/", position, "write_file", arguments)
        if durable:
            journal.durable()
        journal.finish(f"bench:{round_number}:{durable}/", position, "write_file", arguments, {"ok": True})
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=options.dir) as folder:
        journal = ToolJournal(f"sqlite:///{Path(folder) / 'journal.db'}")
        ratios, plain, synced = [], [], []
        for round_number in range(options.rounds):
            without = per_call(journal, options.calls, False, round_number)
            with_sync = per_call(journal, options.calls, True, round_number)
            plain.append(without)
            synced.append(with_sync)
            ratios.append(with_sync / without)
            print(f"round {round_number + 1}: {without * 1e3:.3f} ms without, {with_sync * 1e3:.3f} ms with the fsync "
                  f"({with_sync / without:.2f}x)")  # fmt: skip
        print(f"median: {statistics.median(plain) * 1e3:.3f} ms -> {statistics.median(synced) * 1e3:.3f} ms per "
              f"journaled call; ratio {min(ratios):.2f}-{max(ratios):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
