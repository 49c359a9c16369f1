"""What provenance adds to an MCP guard decision: the same call decided by ``McpPolicy`` with and without the
session's provenance facts, the session holding 200 forwarded calls and 1 MB of results (the issue's bound), in
alternating rounds; p50 and p99 of each and the added p50 per round. With ``--recording``, a new result of 5 KiB
is kept between two decisions (the oldest dropped), as the guard keeps each forwarded call's result: the decision
then follows a change of the session, as it does in use; what keeping a result costs is reported apart.

    python bench/provenance/run.py [--decisions 2000] [--rounds 5] [--recording]
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import time
from functools import partial
from typing import Any

from mcp_types import Tool, ToolAnnotations

from groundstate.guard import McpPolicy
from groundstate.provenance import History

TOOLS = [Tool(name="read_inbox", input_schema={"type": "object"}, annotations=ToolAnnotations(read_only_hint=True)),
         Tool(name="send_email", input_schema={"type": "object"},
              annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))]  # fmt: skip


def session(history: History, calls: int, total: int) -> Any:
    """A session holding ``calls`` results of ``total`` bytes in all: text with addresses, codes and URLs in it."""
    rng = random.Random(7)
    held = history.session("bench")
    history.declare(held, "Summarise my mail and send the summary to alice@corp.example")
    each = total // calls
    for number in range(calls):
        words = []
        while sum(len(w) + 1 for w in words) < each:
            words.append(rng.choice([
                "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))),
                f"user{rng.randint(0, 10**6)}@example.com", f"https://site{rng.randint(0, 999)}.example/p",
                str(rng.randint(10**5, 10**6))]))  # fmt: skip
        history.record(held, f"call-{number}", "mail", "read_inbox", " ".join(words)[:each])
    return held


def timed(policy: McpPolicy, arguments: dict[str, Any], count: int, provenance: Any,
          keep: Any = None) -> list[float]:
    """Each decision's seconds; ``keep(number)`` (untimed here) runs before each one."""
    out = []
    for number in range(count):
        if keep is not None:
            keep(number)
        started = time.perf_counter()
        policy.decide("mail", "send_email", arguments, "bench", provenance=provenance)
        out.append(time.perf_counter() - started)
    return out


def keeper(history: History, held: Any, seconds: list[float]) -> Any:
    """What keeps a new 5 KiB result (timed into ``seconds``), the session staying at its bound."""
    rng = random.Random(11)
    texts = [" ".join(rng.choices(["mail", "from", f"user{n}@example.com", "meeting", str(n * 7919)], k=900))[:5120]
             for n in range(64)]  # fmt: skip

    def keep(number: int) -> None:
        started = time.perf_counter()
        history.record(held, f"later-{number}", "mail", "read_inbox", texts[number % len(texts)])
        seconds.append(time.perf_counter() - started)

    return keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--recording", action="store_true", help="keep a new result between two decisions")
    options = parser.parse_args()
    policy = McpPolicy()
    policy.add_tools("mail", TOOLS)
    history = History(200, 1 << 20)
    held = session(history, 200, 1 << 20)
    arguments = {"to": "alice@corp.example", "body": "Revenue was 4.2M; the meeting is on Friday at 10."}
    added = []
    for round_number in range(options.rounds):
        plain = timed(policy, arguments, options.decisions, None)
        kept: list[float] = []
        keep = keeper(history, held, kept) if options.recording else None
        traced = timed(policy, arguments, options.decisions, partial(history.facts, held), keep)
        p50, p50_traced = statistics.median(plain), statistics.median(traced)
        p99, p99_traced = sorted(plain)[int(len(plain) * 0.99)], sorted(traced)[int(len(traced) * 0.99)]
        added.append(p50_traced - p50)
        print(f"round {round_number + 1}: p50 {p50 * 1e3:.3f} -> {p50_traced * 1e3:.3f} ms (+{added[-1] * 1e3:.3f}), "
              f"p99 {p99 * 1e3:.3f} -> {p99_traced * 1e3:.3f} ms"
              + (f"; keeping a result p50 {statistics.median(kept) * 1e3:.3f} ms" if kept else ""))  # fmt: skip
    print(f"added p50 over {options.rounds} rounds: {min(added) * 1e3:.3f}-{max(added) * 1e3:.3f} ms "
          "(target: at most 0.3 ms)")


if __name__ == "__main__":
    main()
