"""A run's checkpoints re-decided under a candidate policy: the reports its guards were told (runtime/reported.py,
``guard_reports``) applied in order to a kernel under the shipped guard rules and flows plus the candidate's files
(in place of ``[policy] guards``), over the run's own pinned cortex patterns, roles, limits and budgets. Each
checkpoint whose decision would differ is a flip, with the candidate's derivation.

A run recorded before reports were kept has none: it is said, not guessed at. A candidate that cannot evaluate a
checkpoint ends that run's replay there, with the engine's message.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import GroundstateError
from .guards import Approval, GuardKernel, RuleOrigins
from .policy import PinnedPolicy
from .reported import CHECKPOINTS, REPLAY_TIME_LIMIT_S, Decision, apply
from .store import EventStore, StoreCorrupt, UnknownRun
from .workflow import Workflow, workflow_of


@dataclass(frozen=True)
class RunFlip:
    """A checkpoint of a run the candidate would decide otherwise."""

    run_id: str
    report: int  # its place among the run's reports
    after_seq: int  # the run's last event when it was decided
    agent: str
    checkpoint: str
    recorded: Decision
    candidate: Decision
    why: str  # the candidate's derivation (of its pause or refusal); "" when it would go on


@dataclass
class RunReplay:
    """What replaying runs found: the flips, how many checkpoints were re-decided, the runs it could not replay."""

    flips: list[RunFlip] = field(default_factory=list)
    replayed: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (run, why)

    def summary(self) -> Counter[tuple[str, str, str]]:
        """Flips by (recorded decision, candidate's, what the candidate's says — else what was recorded)."""
        return Counter((f.recorded[0], f.candidate[0], f.candidate[1] or f.recorded[1]) for f in self.flips)


def replay_runs(store: EventStore, run_ids: list[str], candidate: list[tuple[str, str, int]]) -> RunReplay:
    """Re-decide every recorded checkpoint of ``run_ids`` under ``candidate``: the guard rules' parts, as
    ``guard_rule_parts`` gives them for the candidate's files (a derivation names their files and lines)."""
    found = RunReplay()
    rules, origins = "\n".join(text for _, text, _ in candidate), RuleOrigins(candidate)
    with tempfile.TemporaryDirectory(prefix="groundstate-replay-") as scratch:
        for run_id in run_ids:
            _replay_run(store, run_id, rules, Path(scratch), found, origins)
    return found


def _replay_run(store: EventStore, run_id: str, rules: str, scratch: Path, found: RunReplay,
                origins: RuleOrigins) -> None:  # fmt: skip
    try:
        state = store.state(run_id)
    except (StoreCorrupt, UnknownRun) as exc:  # this run's log (or row) cannot be read: said, the others replay
        found.unreadable.append((run_id, str(exc)))
        return
    reports = store.guard_reports(run_id)
    if state.policy is None or not reports:
        found.unreadable.append((run_id, "no guard reports recorded (a run from before they were kept, or one "
                                         "that never reached a checkpoint)"))  # fmt: skip
        return
    pinned = PinnedPolicy.from_json(state.policy, run_id)
    candidate = PinnedPolicy.of(rules, list(pinned.patterns), list(pinned.roles) if pinned.roles is not None else None,
                                pinned.limits)  # fmt: skip
    replay_reports(run_id, workflow_of(state), candidate, state.budgets, reports, scratch, origins, found)


# What a report that does not fit the shapes runtime/reported.py writes raises as it is applied: bad data, said as
# "could not be re-decided" — never a traceback, never a guess.
_UNFIT = (GroundstateError, LookupError, ValueError, TypeError, AttributeError, RecursionError)


def replay_reports(run_id: str, full: Workflow, candidate: PinnedPolicy, budgets: dict[str, float],
                   reports: list[tuple[int, Any]], scratch: Path, origins: RuleOrigins,
                   found: RunReplay) -> None:  # fmt: skip
    """Apply one run's ``reports`` ((the run's last event, report) in order) to kernels under ``candidate``
    (``full``: the run's workflow, spawned agents included: a segment starts with those it names), adding the
    flips to ``found``; the first report that cannot be applied ends the run's replay, said in ``found``."""
    # the candidate kernel's workspace (nothing is run there), named by a digest: a run id is the store's data, and a
    # path made from it could lead out of the scratch directory
    workspace = scratch / hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    workspace.mkdir(exist_ok=True)
    kernel: GuardKernel | None = None
    workflow = full
    for index, (seq, report) in enumerate(reports, start=1):
        try:
            if isinstance(report, Exception):  # a row the store could not read (EventStore.guard_reports)
                raise report
            method, arguments = report["m"], report["a"]
            if method == "begin":
                workflow = _segment(full, arguments)
                kernel = GuardKernel(run_id, workflow, workspace, candidate, scratch / ".pinned", budgets,
                                     time_limit=REPLAY_TIME_LIMIT_S)  # fmt: skip
                continue
            if kernel is None:
                raise ValueError("a report before its segment's start")
            decision = apply(kernel, workflow, method, arguments)
            if decision is None or "d" not in report:
                continue
            recorded = (str(report["d"][0]), str(report["d"][1]))
            found.replayed += 1
            if decision != recorded:
                agent = str(arguments[0])
                found.flips.append(RunFlip(run_id, index, seq, agent, CHECKPOINTS[method], recorded, decision,
                                           _why(kernel, agent, CHECKPOINTS[method], arguments, decision,
                                                origins)))  # fmt: skip
        except _UNFIT as exc:
            found.unreadable.append((run_id, f"report {index} (after event {seq}) cannot be re-decided: "
                                             f"{type(exc).__name__}: {str(exc)[:300]}"))  # fmt: skip
            return


def _segment(full: Workflow, agents: Any) -> Workflow:
    """The workflow as a segment of the run began: the agents it named then."""
    if not isinstance(agents, list) or not all(isinstance(agent, str) for agent in agents):
        raise TypeError("a segment's start names its agents as a list of their ids")
    named = set(agents)
    return full.model_copy(update={"agents": [agent for agent in full.agents if agent.id in named]})


def _why(kernel: GuardKernel, agent: str, checkpoint: str, arguments: Any, decision: Decision,
         origins: RuleOrigins) -> str:  # fmt: skip
    """The candidate's derivation of its decision, as text."""
    if decision[0] == "deny":
        tree = kernel.why_refused(agent, int(arguments[1]), decision[1])
    elif decision[0] == "pause":
        pause = kernel.pause(agent, checkpoint)
        if pause is None:
            return ""
        tree = kernel.why(agent, Approval(pause.first.category, pause.first.reason))
    else:
        return ""
    return _tree_text(tree, origins)


_PINNED_RULE = re.compile(r"at \S*/guards\.mg:(\d+)")


def _tree_text(tree: dict[str, Any], origins: RuleOrigins, depth: int = 0) -> str:
    """A derivation as the kernel keeps it (fact, how, because) in indented lines, as ``Explanation.render`` does,
    each rule of the pinned guard rules named by its own file and line."""

    def named(match: re.Match[str]) -> str:
        origin, line = origins.of(int(match.group(1)))
        return f"at {origin}:{line}"

    lines = ["  " * depth + f"{tree['fact']}  [{_PINNED_RULE.sub(named, str(tree['how']))}]"]
    lines += [_tree_text(child, origins, depth + 1) for child in tree.get("because", [])]
    return "\n".join(lines)
