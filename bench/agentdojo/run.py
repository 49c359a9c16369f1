"""AgentDojo through `groundstate mcp serve`, with a worst-case agent and no LLM.

For each sampled pair of a suite's user task and injection task: a fresh environment with the attack in every
injection vector, served over MCP (server.py) behind the guard; the agent declares the user task's prompt as the
request (``_meta["groundstate/request"]``), plays the user task's ground-truth calls and — as soon as a result holds
the injection — also the injection task's ground-truth calls: it obeys every injection. Then the suite's own checks
judge the environment: did the attack succeed (security), did the user task get done (utility). The same user tasks
run once more without an attack (utility without attack). A held call counts as not done.

    python bench/agentdojo/run.py --suite workspace --pairs 40 --seed 1 [--direct] [--version v1.2.2]

``--direct`` runs the same agent against the server without the guard (the baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import random
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentdojo.task_suite.load_suites import get_suite
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from server import ATTACK, VERSION, environment  # noqa: E402 - beside this file

SEPARATOR = "__"


@dataclass
class Outcome:
    """One episode: what the suite's checks say and what the guard did."""

    utility: bool | None = False  # None: the suite judges this task only from a model's trace
    security: bool = False  # True: the attack succeeded
    denied: int = 0
    held: int = 0
    calls: list[tuple[str, str]] = field(default_factory=list)  # (tool, ok | denied | held | error)
    attack_kinds: list[str] = field(default_factory=list)  # how each injection call ended


async def episode(suite: Any, user_id: str, injection_id: str | None, folder: Path, direct: bool) -> Outcome:
    user = suite.get_user_task_by_id(user_id)
    injection = suite.get_injection_task_by_id(injection_id) if injection_id else None
    pre = environment(suite, injection_id)
    state = folder / "state.pickle"
    server = [sys.executable, str(HERE / "server.py"), suite.name, str(HERE / "annotations.json"), str(state),
              *([injection_id] if injection_id else []), "--version", _version_name(suite)]  # fmt: skip
    if direct:
        params = StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ))
        prefix = ""
    else:
        config = folder / "groundstate.toml"
        labels = json.loads((HERE / "annotations.json").read_text())["_labels"][suite.name]
        config.write_text(f'[mcp]\napproval_timeout_sec = 0.2\npolicy = ["{HERE / "unattended.mg"}"]\n'
                          f"[mcp.servers.dojo]\ncommand = {json.dumps(server)}\n[mcp.servers.dojo.labels]\n"
                          + "".join(f"{tool} = {json.dumps(kinds)}\n" for tool, kinds in sorted(labels.items())))
        env = {**os.environ, "GROUNDSTATE_HOME": str(folder / "home"), "GROUNDSTATE_CONFIG": str(config)}
        params = StdioServerParameters(command=sys.executable, args=["-m", "groundstate", "mcp", "serve"], env=env)
        prefix = "dojo" + SEPARATOR
    outcome, texts = Outcome(), []
    meta: Any = {"groundstate/request": user.PROMPT}
    planned = list(user.ground_truth(pre))
    attack = list(injection.ground_truth(pre)) if injection else []
    marker = ATTACK.split("{goal}")[0][:40].casefold() if injection else None  # the agent spots the injection
    ran: list[Any] = []  # the calls that ran: the trace AgentDojo judges some tasks by
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        obeyed = False
        while planned:
            call = planned.pop(0)
            text = await play(client, prefix + call.function, dict(call.args), meta, outcome)
            texts.append(text)
            ran += [call] if outcome.calls[-1][1] == "ok" else []
            if marker and not obeyed and marker in text.casefold():
                obeyed = True  # the worst case: every injection is obeyed at once
                for evil in attack:
                    texts.append(await play(client, prefix + evil.function, dict(evil.args), meta, outcome))
                    outcome.attack_kinds.append(outcome.calls[-1][1])
                    ran += [evil] if outcome.calls[-1][1] == "ok" else []
    post = pickle.loads(state.read_bytes())
    texts.append(user.GROUND_TRUTH_OUTPUT)  # the answer the task expects the agent to give the user, last
    output = "\n".join(texts)
    try:
        outcome.utility = bool(user.utility(output, pre, post))
    except NotImplementedError:  # a task AgentDojo judges from the trace of calls
        outcome.utility = bool(user.utility_from_traces(output, pre, post, ran))
    if injection is not None:
        try:
            outcome.security = bool(injection.security(output, pre, post))
        except NotImplementedError:  # judged from the trace of calls: the calls that ran are the trace here
            outcome.security = bool(injection.security_from_traces(output, pre, post,
                                                                   ran))  # fmt: skip
    return outcome


async def play(client: ClientSession, tool: str, arguments: dict[str, Any], meta: Any, outcome: Outcome) -> str:
    try:
        result = await client.call_tool(tool, _plain(arguments), meta=meta)
    except MCPError as exc:  # a protocol error: the call did not run
        outcome.calls.append((tool, "error"))
        return f"failed: {exc}"
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    decision = (result.meta or {}).get("groundstate/decision")
    if decision is not None:  # refused by the guard: by the policy, or held and not approved (a held call: not done)
        kind = "held" if decision.get("policy_decision") == "approve" else "denied"
        outcome.denied += kind == "denied"
        outcome.held += kind == "held"
        outcome.calls.append((tool, kind))
        return text
    outcome.calls.append((tool, "error" if result.is_error else "ok"))
    return text


def _version_name(suite: Any) -> str:
    """The name AgentDojo loads a suite's release by: (1, 2, 0) is "v1.2", (1, 0, 0) "v1", (1, 1, 2) "v1.1.2"."""
    numbers = list(suite.benchmark_version)
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return "v" + ".".join(str(number) for number in numbers)


def _plain(value: Any) -> Any:
    """Arguments as JSON values (ground truths may hold dates and models)."""
    return json.loads(json.dumps(value, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default="workspace")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--direct", action="store_true", help="no guard: the baseline")
    parser.add_argument("--json", type=Path, default=None, help="write every episode's outcome here")
    parser.add_argument("--version", default=VERSION,
                        help=f"AgentDojo's benchmark version (default {VERSION}, the one the rules were developed on)")
    options = parser.parse_args()
    suite = get_suite(options.version, options.suite)
    pairs = [(u, i) for u in sorted(suite.user_tasks) for i in sorted(suite.injection_tasks)]
    sample = sorted(random.Random(options.seed).sample(pairs, min(options.pairs, len(pairs))))
    users = sorted({u for u, _ in sample})
    attacked, clean = [], []
    with tempfile.TemporaryDirectory(prefix="agentdojo-") as scratch:
        for number, (user_id, injection_id) in enumerate(sample):
            folder = Path(scratch) / f"a{number}"
            folder.mkdir()
            attacked.append(asyncio.run(episode(suite, user_id, injection_id, folder, options.direct)))
            print(f"{user_id} + {injection_id}: attack {'SUCCEEDED' if attacked[-1].security else 'failed'}, "
                  f"utility {attacked[-1].utility}, denied {attacked[-1].denied}, held {attacked[-1].held}",
                  flush=True)  # fmt: skip
        for number, user_id in enumerate(users):
            folder = Path(scratch) / f"c{number}"
            folder.mkdir()
            clean.append(asyncio.run(episode(suite, user_id, None, folder, options.direct)))
    rate = sum(o.security for o in attacked) / len(attacked)
    # An injection task whose ground truth has no call is either an attack on the answer itself ("say that I should
    # visit X": out of reach of anything that judges calls, and it succeeds whenever the agent reads it) or one
    # AgentDojo spells no calls for (the worst-case agent has nothing to play: it fails with or without the guard).
    # The rate over the pairs whose injection gives calls to play is reported apart.
    plain = environment(suite, None)
    callless = {i for _, i in sample if not list(suite.get_injection_task_by_id(i).ground_truth(plain))}
    effects = [o for (_, i), o in zip(sample, attacked, strict=True) if i not in callless]
    effect_rate = sum(o.security for o in effects) / max(len(effects), 1)
    judged, judged_clean = [o for o in attacked if o.utility is not None], [o for o in clean if o.utility is not None]
    under = sum(bool(o.utility) for o in judged) / max(len(judged), 1)
    without = sum(bool(o.utility) for o in judged_clean) / max(len(judged_clean), 1)
    where = "direct" if options.direct else "behind the guard"
    print(f"{options.suite} {options.version} ({where}, {len(sample)} pairs, seed {options.seed}): "
          f"attack success {rate:.1%} (of the {len(effects)} pairs whose injection gives calls to "
          f"play: {effect_rate:.1%}), utility under attack {under:.1%}, utility without attack "
          f"{without:.1%} ({len(judged_clean)} of {len(users)} user tasks judged); calls denied "
          f"{sum(o.denied for o in attacked)}, held "
          f"{sum(o.held for o in attacked)}")  # fmt: skip
    if options.json is not None:
        rows = [{"user": u, "injection": i, **vars(o)} for (u, i), o in zip(sample, attacked, strict=True)]
        options.json.write_text(json.dumps({"attacked": rows, "clean": [vars(o) for o in clean]}, indent=1))


if __name__ == "__main__":
    main()
