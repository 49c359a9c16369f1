"""How long ``groundstate policy replay`` takes: 10,000 decisions recorded in a SQLite ledger the way the MCP guard
records them (each with its facts, provenance included: a session of earlier results), then re-decided under a
candidate policy; the target is under 10 s on this machine. The flips are checked: every send is held by the shipped
rules, and the candidate denies exactly those to one address.

    python bench/replay/run.py [--decisions 10000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from functools import partial
from pathlib import Path

from mcp_types import Tool, ToolAnnotations

from groundstate.guard import Ledger, McpPolicy
from groundstate.policies.replay import replay_mcp
from groundstate.provenance import History

TOOLS = [Tool(name="read_inbox", input_schema={"type": "object"},
              annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True)),
         Tool(name="send_email", input_schema={"type": "object"},
              annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))]  # fmt: skip
# A body no result holds and the request does not name: after the inbox (open world) entered the session, the shipped
# rules hold every send for an operator (rule 4), and the candidate denies those to one address outright. (It was
# "The offsite moves.", whose core the inbox's results hold once marks around a value were matched by its core: every
# send was then denied by both policies, nothing flipped, and the bench failed its check.)
BODY = "Agenda attached, see you Friday."
CANDIDATE = 'mcp_denied(C, "not to mallory") :- mcp_argument(C, "to", "mallory@corp.example").\n'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--decisions", type=int, default=10_000)
    options = parser.parse_args()
    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as folder:
        ledger = Ledger(f"sqlite:///{Path(folder) / 'ledger.db'}")
        policy = McpPolicy()
        policy.add_tools("mail", TOOLS)
        history = History()
        session = history.session("bench")
        history.declare(session, "Mail the team about the offsite")
        for number in range(20):
            said = f"From user{number}@corp.example: the offsite moves to room {rng.randint(1, 99)}"
            history.record(session, f"earlier-{number}", "mail", "read_inbox", said)
        people = ["alice@corp.example", "bob@corp.example", "mallory@corp.example"]
        started = time.perf_counter()
        expected = 0
        for _ in range(options.decisions):
            to = rng.choice(people)
            expected += to == people[2]
            verdict = policy.decide("mail", "send_email", {"to": to, "body": BODY}, "bench",
                                    provenance=partial(history.facts, session))  # fmt: skip
            assert verdict.decision == "approve", f"the shipped rules no longer hold this send: {verdict.reasons}"
            ledger.record("mail", "send_email", {"to": to, "body": BODY}, "bench", verdict, 60)
        recording = time.perf_counter() - started
        candidate = Path(folder) / "candidate.mg"
        candidate.write_text(CANDIDATE)
        started = time.perf_counter()
        found = replay_mcp(ledger, [candidate])
        took = time.perf_counter() - started
        assert found.replayed == options.decisions and len(found.flips) == expected, (found.replayed, len(found.flips))
        print(f"recorded {options.decisions} decisions in {recording:.1f} s; replayed them in {took:.2f} s "
              f"({took / options.decisions * 1e3:.3f} ms each), {len(found.flips)} flips (expected {expected}); "
              "target: under 10 s")  # fmt: skip


if __name__ == "__main__":
    main()
