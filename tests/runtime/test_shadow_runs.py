"""Shadow rules for runs: ``[policy] shadow`` names a candidate's guard files, decided beside the run's own policy
at every checkpoint and never obeyed. Each disagreement is a ``ShadowDisagreed`` event in the run's log, a
Prometheus counter and a line on the console's run page; a candidate that agrees leaves nothing."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from groundstate.config import Policy, ProjectConfig
from groundstate.runtime import SHADOW_DISAGREED, EventStore, Runtime, make_backend

from ..console.conftest import serving
from .conftest import Script, envelope

FLOW = "name: shadowed\nagents:\n  - id: writer_a\n    instructions: Write it.\n    tools: [write_file]\n"
HOLDS_WRITES = ('needs_approval(R, A, /safety, "the candidate holds every write") :- '
                'tool_call(R, A, _, /write_file, _).\n')
WRITE = envelope("Writing.", [{"tool": "write_file", "argument": "out.txt", "content": "written"}])
DONE = envelope("Done. [STATUS: SUCCESS]")


def shadowed_runtime(tmp_path: Path, url: str, candidate: str, enforced: str | None = None) -> Runtime:
    """A runtime whose runs are shadowed by ``candidate`` (in place of ``enforced``, the run's own [policy] guards)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "candidate.mg").write_text(candidate)
    (tmp_path / "enforced.mg").write_text(enforced or "")
    guards = [tmp_path / "enforced.mg"] if enforced is not None else []
    settings = ProjectConfig(policy=Policy(guards=guards, shadow=[tmp_path / "candidate.mg"]))
    return Runtime(EventStore(f"sqlite:///{tmp_path / 'gs.db'}"), tmp_path / "home", settings=settings,
                   backend=make_backend(f"openai-chat:scripted@{url}"))  # fmt: skip


def test_a_disagreement_is_logged_counted_and_never_obeyed(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.by_round = True
    script.answers = {"writer_a": [WRITE, DONE]}
    runtime = shadowed_runtime(tmp_path, url, HOLDS_WRITES)
    run_id = runtime.create(FLOW, "shadowed.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "completed"  # the candidate would have held the write: not obeyed
    assert (tmp_path / "home" / "runs" / run_id / "workspace" / "out.txt").read_text() == "written"
    [disagreed] = [e for e in runtime.store.events(run_id) if e.type == SHADOW_DISAGREED]
    payload = disagreed.payload
    assert (payload["agent"], payload["checkpoint"], payload["decision"], payload["shadow"]) == \
        ("writer_a", "tool_call", "go", "pause")  # fmt: skip
    assert payload["shadow_reason"] == "safety: the candidate holds every write"
    assert state.policy is not None and payload["candidate"].startswith("sha256:")
    assert payload["candidate"] != state.policy["digest"]
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(runtime.run_metrics.render())
               for s in family.samples}  # fmt: skip
    assert samples[("groundstate_run_shadow_disagreements_total", (("decision", "go"), ("shadow", "pause")))] == 1

    with serving(tmp_path, "--db", f"sqlite:///{tmp_path / 'gs.db'}") as console:
        page = console.api().get(f"/runs/{run_id}").text
    assert ("Shadow policy at writer_a's tool_call (event " in page and "decided go; the shadow policy would "
            "pause — safety: the candidate holds every write" in page), page  # fmt: skip


def test_a_candidate_that_agrees_leaves_nothing(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.by_round = True
    script.answers = {"writer_a": [WRITE, DONE]}
    runtime = shadowed_runtime(tmp_path, url, "# the shipped rules alone\n")
    run_id = runtime.create(FLOW, "shadowed.yaml", "scripted")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    assert not [e for e in runtime.store.events(run_id) if e.type == SHADOW_DISAGREED]


def test_the_candidate_refusing_what_the_run_obeys_is_a_disagreement_too(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """The reverse: the run's own rules hold the write; the candidate (without that rule) lets it through. The run
    pauses as its own policy says; the log says the candidate would have gone on."""
    url, script = model
    script.by_round = True
    script.answers = {"writer_a": [WRITE, DONE]}
    runtime = shadowed_runtime(tmp_path, url, "# without the rule\n", enforced=HOLDS_WRITES)
    run_id = runtime.create(FLOW, "shadowed.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "awaiting_approval" and state.pause is not None
    assert state.pause.reason == "the candidate holds every write"
    assert not (tmp_path / "home" / "runs" / run_id / "workspace" / "out.txt").exists()
    [disagreed] = [e.payload for e in runtime.store.events(run_id) if e.type == SHADOW_DISAGREED]
    assert (disagreed["decision"], disagreed["shadow"]) == ("pause", "go")


def test_config_check_names_a_candidate_that_does_not_parse_and_a_signing_key_missing(tmp_path: Path) -> None:
    (tmp_path / "candidate.mg").write_text("needs_approval(R, A, /safety, X) :- \n")
    (tmp_path / "groundstate.toml").write_text('[policy]\nshadow = ["candidate.mg"]\n\n[audit]\nsign = true\n'
                                               'key_env = "NOBODY_SET_THIS_KEY"\n')  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "groundstate", "config", "check", "--config",
                           str(tmp_path / "groundstate.toml")], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert re.search(r"groundstate\.toml:2: policy\.shadow: .*candidate\.mg:\d+:\d+: error", done.stderr), done.stderr
    assert re.search(r"groundstate\.toml:5: audit\.sign: .*NOBODY_SET_THIS_KEY is not set", done.stderr), \
        done.stderr  # fmt: skip


EXPLOSIVE = """n(0) :- tool_call(_, _, _, _, _).
n(M) :- n(N), :lt(N, 3000), M = fn:plus(N, 1).
never(R) :- tool_call(R, _, _, _, _), n(A), n(B), n(C), X = fn:plus(A, B), Y = fn:plus(X, C), :lt(Y, -1).
needs_approval(R, A, /safety, "slow") :- tool_call(R, A, _, /write_file, _), never(R).
"""  # 3000 cubed rows to join, deriving nothing: past every fact limit's reach (found by an attack helper)


def test_a_candidate_that_would_take_hours_is_cut_off_and_the_run_goes_on(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script.by_round = True
    script.answers = {"writer_a": [WRITE, DONE]}
    runtime = shadowed_runtime(tmp_path, url, EXPLOSIVE)
    run_id = runtime.create(FLOW, "shadowed.yaml", "scripted")
    state = asyncio.run(asyncio.wait_for(runtime.drive(run_id), 60))
    assert state.status == "completed"
    [disagreed] = [e.payload for e in runtime.store.events(run_id) if e.type == SHADOW_DISAGREED]
    assert disagreed["shadow"] == "error" and "time limit of 0.25 s" in disagreed["shadow_reason"], disagreed
