"""One permission decision for one tool call: groundstate's decision path versus regopy (OPA's Rego in C++) on the
same policy (policy.mg on top of the MCP guard's shipped mcp.mg; policy.rego with mcp.mg's rules written in Rego),
the same inputs, every answer checked equal.

    python bench/decision/run.py            # 10,000 decisions per row, best and median of 3 runs
    python bench/decision/run.py --quick    # 2,000, one run

Rows:
- groundstate decision path: the call's facts supposed in the guard's kernel, the verdict (decision and every
  reason) read, the facts gone (``Kernel.supposing``) — what OPA's ``opa bench`` measures for a query.
- groundstate MCP guard decide: ``McpPolicy.decide`` whole, as ``groundstate mcp serve`` calls it: the digest of
  the exact arguments, the arguments flattened to facts, the decision path, and for a refusal or a held call its
  derivation tree (what "why was this denied" shows).
- derivation only: the derivation tree of the refusals and held calls, alone.
- regopy: ``set_input`` and ``query`` of the verdict, output parsed (the interpreted mode).
- regopy, compiled bundle: the verdict's query built once into a bundle (``Interpreter.build``), each call
  ``set_input`` and ``query_bundle`` — regopy's fastest documented mode.
- cedarpy (Cedar's Rust engine): policy.cedar parsed once (``PolicySet``), the users, roles and tools once
  (``Entities``), each call one ``is_authorized`` with the call as principal, resource and context; the determining
  policies' ids read as the verdict (Cedar answers allow or deny; the ids say which of the three it is).
OPA's own figure (Go, its published ``opa bench`` of an RBAC allow) is 35.8 µs median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cedarpy
from regopy import Interpreter

from groundstate.guard.policy import McpPolicy
from groundstate.kernel import why_row

HERE = Path(__file__).parent
USERS = ["alice", "bob", "carol", "dave", "mallory"]
TOOLS = {"git": ["git_status", "git_log", "git_add", "git_commit", "git_reset"], "time": ["get_current_time"]}
READ_ONLY = {"git_status", "git_log", "get_current_time"}


def inputs(count: int, seed: int = 3) -> list[dict[str, Any]]:
    """Calls from every user to every tool, some on a repository under /etc."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        server = rng.choice(sorted(TOOLS))
        path = rng.choice(["/srv/repo", "/srv/repo", "/srv/repo", "/home/u/project", "/home/u/project", "/etc/secrets"])
        out.append({"server": server, "tool": rng.choice(TOOLS[server]), "client": rng.choice(USERS),
                    "arguments": {"repo_path": path}})  # fmt: skip
    return out


def guard() -> McpPolicy:
    policy = McpPolicy([HERE / "policy.mg"])
    for server, tools in TOOLS.items():
        hints = [SimpleNamespace(name=t, annotations=SimpleNamespace(read_only_hint=t in READ_ONLY,
                                                                     destructive_hint=t not in READ_ONLY))
                 for t in tools]  # fmt: skip
        policy.add_tools(server, hints)
    return policy


def decision_path(policy: McpPolicy) -> Callable[[dict[str, Any]], tuple[str, list[str]]]:
    """The call's facts supposed, the verdict read."""
    kernel = policy.kernel

    def decide(call: dict[str, Any]) -> tuple[str, list[str]]:
        name = f"call-{os.urandom(6).hex()}"  # as McpPolicy.decide names a call
        facts = [("mcp_call", (name, call["server"], call["tool"], "sha256:-", call["client"])),
                 *(("mcp_argument", (name, key, value)) for key, value in call["arguments"].items())]  # fmt: skip
        with kernel.supposing(facts):
            [(_, decision, reasons)] = kernel.match("mcp_verdict", name)
        return str(decision).lstrip("/"), [str(r) for r in reasons]

    return decide


def guard_decide(policy: McpPolicy) -> Callable[[dict[str, Any]], tuple[str, list[str]]]:
    def decide(call: dict[str, Any]) -> tuple[str, list[str]]:
        verdict = policy.decide(call["server"], call["tool"], call["arguments"], call["client"])
        return verdict.decision, verdict.reasons

    return decide


def derivation_only(policy: McpPolicy) -> Callable[[dict[str, Any]], tuple[str, list[str]]]:
    """The tree alone, over a call already supposed (timed inside the supposition)."""
    kernel = policy.kernel

    def tree(call: dict[str, Any]) -> tuple[str, list[str]]:
        name = "call-tree"
        facts = [("mcp_call", (name, call["server"], call["tool"], "sha256:-", call["client"])),
                 *(("mcp_argument", (name, key, value)) for key, value in call["arguments"].items())]  # fmt: skip
        with kernel.supposing(facts):
            [(_, decision, reasons)] = kernel.match("mcp_verdict", name)
            started = time.perf_counter()
            text = why_row(kernel, "mcp_decision", name, decision, reasons[0]).render()  # values, never a pattern
            tree.seconds.append(time.perf_counter() - started)  # type: ignore[attr-defined]
        assert "derived by the rule" in text, text
        return str(decision).lstrip("/"), [str(r) for r in reasons]

    tree.seconds = []  # type: ignore[attr-defined]
    return tree


def regopy_decide() -> Callable[[dict[str, Any]], tuple[str, list[str]]]:
    rego = Interpreter()
    rego.add_module("guard", (HERE / "policy.rego").read_text())

    def decide(call: dict[str, Any]) -> tuple[str, list[str]]:
        rego.set_input(call)
        output = json.loads(str(rego.query("data.guard.verdict")))
        [verdict] = output["expressions"]
        return verdict["decision"], sorted(verdict["reasons"])

    return decide


def regopy_bundle() -> Callable[[dict[str, Any]], tuple[str, list[str]]]:
    """The verdict's query compiled once into a bundle; each call only sets the input and runs the bundle."""
    builder = Interpreter()
    builder.add_module("guard", (HERE / "policy.rego").read_text())
    bundle = builder.build("data.guard.verdict")
    rego = Interpreter()

    def decide(call: dict[str, Any]) -> tuple[str, list[str]]:
        rego.set_input(call)
        [verdict] = json.loads(str(rego.query_bundle(bundle)))["expressions"]
        return verdict["decision"], sorted(verdict["reasons"])

    return decide


ROLES = {"alice": ["admin"], "bob": ["developer"], "carol": ["viewer"], "dave": ["developer", "viewer"]}
GRANTS = {"viewer": ["git/git_status", "git/git_log", "time/get_current_time"],
          "developer": ["git/git_status", "git/git_log", "git/git_add", "git/git_commit"],
          "admin": ["git/git_status", "git/git_log", "git/git_add", "git/git_commit", "git/git_reset",
                    "time/get_current_time"]}  # fmt: skip


def cedar_entities() -> list[dict[str, Any]]:
    """policy.mg's users and roles, and each tool with the roles that grant it and its hints, as Cedar entities."""
    role = lambda name: {"type": "Role", "id": name}  # noqa: E731
    users = [{"uid": {"type": "User", "id": user}, "attrs": {"known": True}, "parents": [role(r) for r in roles]}
             for user, roles in ROLES.items()]  # fmt: skip
    roles = [{"uid": role(name), "attrs": {}, "parents": []} for name in GRANTS]
    tools = [{"uid": {"type": "Tool", "id": f"{server}/{tool}"}, "parents": [],
              "attrs": {"read_only": tool in READ_ONLY, "destructive": tool not in READ_ONLY,
                        "granted_to": [{"__entity": role(r)} for r, granted in GRANTS.items()
                                       if f"{server}/{tool}" in granted]}}
             for server, listed in TOOLS.items() for tool in listed]  # fmt: skip
    return users + roles + tools


def cedarpy_decide() -> Callable[[dict[str, Any]], tuple[str, list[str]]]:
    """One ``is_authorized`` per call over the parsed policies and entities; the determining policies' ``@id``s
    read as the three-way verdict and its reasons (worded as mcp.mg and policy.mg word them)."""
    policies = cedarpy.PolicySet.from_str((HERE / "policy.cedar").read_text())
    entities = cedarpy.Entities.from_json_str(json.dumps(cedar_entities()))
    ids = {f"policy{i}": name for i, name in enumerate(
        ["unknown-user", "no-role", "under-etc", "destructive", "changes", "read-only"])}  # fmt: skip

    def decide(call: dict[str, Any]) -> tuple[str, list[str]]:
        tool, user, path = f"{call['server']}/{call['tool']}", call["client"], call["arguments"]["repo_path"]
        request = {"principal": {"type": "User", "id": user}, "action": {"type": "Action", "id": "call"},
                   "resource": {"type": "Tool", "id": tool}, "context": {"repo_path": path}}  # fmt: skip
        result = cedarpy.is_authorized(request, policies, entities)
        reasons = {ids[r] for r in result.diagnostics.reasons}
        if not result.allowed:
            wording = {"unknown-user": f"unknown user {user}", "no-role": f"{user} has no role that grants {tool}",
                       "under-etc": f"the repository {path} is under /etc"}  # fmt: skip
            return "deny", sorted(wording[r] for r in reasons) or ["no rule permits this call"]
        held = []
        if "destructive" in reasons:
            held.append(f"{tool} may destroy data (the server marks it destructive): an operator approves it first")
        if "changes" in reasons:
            held.append(f"{tool} changes things (it is not read-only): an operator approves it first")
        return ("approve", sorted(held)) if held else ("permit", [f"{tool} is read-only"])

    return decide


def timed(decide: Callable[[dict[str, Any]], tuple[str, list[str]]], calls: list[dict[str, Any]]) -> tuple[
        list[float], list[tuple[str, list[str]]]]:  # fmt: skip
    for call in calls[:200]:  # warm-up: plans compiled, caches filled
        decide(call)
    seconds, answers = [], []
    for call in calls:
        started = time.perf_counter()
        answer = decide(call)
        seconds.append(time.perf_counter() - started)
        answers.append((answer[0], sorted(answer[1])))
    return seconds, answers


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    count, runs = (2000, 1) if quick else (10_000, 3)
    calls = inputs(count)
    print(f"# Python {platform.python_version()}, {os.cpu_count()} cores, {count} decisions per row, {runs} runs")
    policy = guard()
    tree = derivation_only(guard())
    refused = [c for c in calls if tree(c)[0] != "permit"]
    tree.seconds.clear()  # type: ignore[attr-defined]
    rows: dict[str, Callable[[dict[str, Any]], tuple[str, list[str]]]] = {
        "groundstate decision path": decision_path(policy),
        "groundstate MCP guard decide (digest, facts, decision, derivation of refusals)": guard_decide(policy),
        "regopy (Rego, C++), interpreted query": regopy_decide(),
        "regopy (Rego, C++), compiled bundle": regopy_bundle(),
        "cedarpy (Cedar, Rust), parsed policies and entities": cedarpy_decide(),
    }
    medians: dict[str, list[float]] = {name: [] for name in [*rows, "derivation tree of a refusal, alone"]}
    p99: dict[str, list[float]] = {name: [] for name in medians}
    reference: list[tuple[str, list[str]]] | None = None
    for _ in range(runs):
        for name, decide in rows.items():
            seconds, answers = timed(decide, calls)
            if reference is None:
                reference = answers
            elif answers != reference:
                wrong = next(i for i, (a, b) in enumerate(zip(answers, reference, strict=True)) if a != b)
                raise SystemExit(f"{name} answered {answers[wrong]} for {calls[wrong]}; expected {reference[wrong]}")
            medians[name].append(statistics.median(seconds))
            p99[name].append(percentile(seconds, 0.99))
        timed(tree, refused)
        medians["derivation tree of a refusal, alone"].append(statistics.median(tree.seconds))  # type: ignore[attr-defined]
        p99["derivation tree of a refusal, alone"].append(percentile(tree.seconds, 0.99))  # type: ignore[attr-defined]
        tree.seconds.clear()  # type: ignore[attr-defined]
    assert reference is not None
    kinds = {kind: sum(1 for d, _ in reference if d == kind) for kind in ("permit", "approve", "deny")}
    print(f"# answers checked equal on every row: {kinds}")
    print("| path | median µs (best / median of runs) | p99 µs (best) |\n|---|---|---|")
    for name in medians:
        best, middle = min(medians[name]) * 1e6, statistics.median(medians[name]) * 1e6
        print(f"| {name} | {best:.0f} / {middle:.0f} | {min(p99[name]) * 1e6:.0f} |")
    ours = medians["groundstate decision path"]
    print()
    for peer in ("regopy (Rego, C++), interpreted query", "regopy (Rego, C++), compiled bundle",
                 "cedarpy (Cedar, Rust), parsed policies and entities"):  # fmt: skip
        ratios = sorted(theirs / mine for theirs, mine in zip(medians[peer], ours, strict=True))  # within each run
        print(f"{peer} / decision path, within each run: {', '.join(f'{r:.2f}x' for r in ratios)}")
    print(f"decision path / OPA's published 35.8 µs: {min(ours) * 1e6 / 35.8:.1f}x")


if __name__ == "__main__":
    main()
