"""Each key of groundstate.toml reaches the run: models (default, per role, per agent — recorded in the run), policy
files (guards and patterns, added to the shipped ones and pinned), limits; and the entry points read the file."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from groundstate.config import ConfigFileError, load_config
from groundstate.errors import ConfigurationError
from groundstate.logic import LogicError
from groundstate.runtime import HELD_FOR_OPERATOR, EventStore, Runtime, WorkflowError, make_backend
from tests.trusted import trusted

from .conftest import Script, console_client, envelope, sse

FLOW = "name: cfg\nagents:\n  - id: writer_a\n    instructions: Write it.\n    tools: [write_file]\n"


def settings(tmp_path: Path, text: str) -> Runtime:
    path = tmp_path / "groundstate.toml"
    path.write_text(text)
    return Runtime(EventStore(f"sqlite:///{tmp_path / 'c.db'}"), tmp_path / "home",
                   settings=load_config(path).config)  # fmt: skip


def test_models_default_is_the_runs_model(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Done. [STATUS: SUCCESS]")]}
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:main@{url}"\n')
    run_id = runtime.create(FLOW, "cfg.yaml")
    assert runtime.store.state(run_id).model == f"openai-chat:main@{url}"
    assert asyncio.run(runtime.drive(run_id)).status == "completed" and len(script.requests) == 1


@pytest.mark.parametrize("table", ["agents", "roles"])
def test_models_by_agent_or_role_are_recorded_and_answer(
    tmp_path: Path, model: tuple[str, Script], other: tuple[str, list[dict[str, object]]], table: str
) -> None:
    url, script = model
    other_url, seen = other
    key = "writer_a" if table == "agents" else "writer_"
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:main@{url}"\n[models.{table}]\n'
                                 f'{key} = "openai-chat:other@{other_url}"\n')  # fmt: skip
    run_id = runtime.create(FLOW, "cfg.yaml")
    assert runtime.store.events(run_id)[0].payload["models"] == {"writer_a": f"openai-chat:other@{other_url}"}
    later = settings(tmp_path, f'[models]\ndefault = "openai-chat:main@{url}"\n')  # the file changed since
    assert asyncio.run(later.drive(run_id)).status == "completed"
    assert script.requests == [] and len(seen) == 1  # the model recorded at creation answered


def test_policy_patterns_and_guards_are_added_and_pinned(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    (tmp_path / "patterns.json").write_text(json.dumps([{
        "id": "no_secret", "name": "No secrets", "trigger_event": "ToolCall", "category": "safety",
        "condition": 'tool_call(Run, Agent, Seq, /write_file, T), :string:contains(T, "secret")',
        "action": {"RequestApproval": {"reason": "a secret file"}}}]))  # fmt: skip
    (tmp_path / "mine.mg").write_text(
        'needs_approval(R, A, /safety, "a draft file") :- tool_call(R, A, _, /write_file, T), '
        ':string:starts_with(T, "draft").\n'
    )
    text = (
        f'[models]\ndefault = "openai-chat:main@{url}"\n[policy]\npatterns = ["patterns.json"]\nguards = ["mine.mg"]\n'
    )
    runtime = settings(tmp_path, text)
    ids = [p.id for p in runtime.policy.patterns]
    assert "guard_file_deletion" in ids and "no_secret" in ids
    for target, reason in (("secret.txt", "a secret file"), ("draft.txt", "a draft file")):
        script.answers = {"writer_a": [envelope("W.", [{"tool": "write_file", "argument": target, "content": "x"}])]}
        run_id = runtime.create(FLOW, "cfg.yaml")
        state = asyncio.run(runtime.drive(run_id))
        assert state.pause is not None and state.pause.reason == reason
        assert not (runtime.home / "runs" / run_id / "workspace" / target).exists()


def test_a_bad_guard_file_is_refused_with_its_position(tmp_path: Path) -> None:
    (tmp_path / "bad.mg").write_text("needs_approval(R, A, /quality :- nonsense.\n")
    with pytest.raises(LogicError, match=r"bad\.mg:1"):
        settings(tmp_path, '[policy]\nguards = ["bad.mg"]\n')


def test_limits_reach_the_run(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Late. [STATUS: SUCCESS]")]}
    script.delays = {"writer_a": 5.0}
    runtime = settings(tmp_path, "[limits.shard_profiles.writer]\nmax_execution_time_sec = 0.5\n")
    runtime._backend = make_backend(f"openai-chat:scripted@{url}")
    state = asyncio.run(runtime.drive(runtime.create(FLOW, "cfg.yaml")))
    assert "did not answer within 0.5 s" in (state.nodes["writer_a"].error or "")


def test_run_and_serve_read_the_configuration(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Done. [STATUS: SUCCESS]")]}
    (tmp_path / "flow.yaml").write_text(FLOW)
    (tmp_path / "groundstate.toml").write_text(f'[models]\ndefault = "openai-chat:main@{url}"\n')
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env.pop("GROUNDSTATE_CONFIG", None)
    env.pop("GROUNDSTATE_TOKEN", None)
    trusted(tmp_path / "groundstate.toml", env)
    done = subprocess.run([sys.executable, "-m", "groundstate", "run", "flow.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert [agent for agent, _ in script.requests] == ["writer_a"]  # answered by the configured default model
    (tmp_path / "broken.toml").write_text("[models]\nnope = 1\n")
    commands = (["run", "flow.yaml"], ["serve", "--port", "1"], ["runs", "resume", "x"], ["demo", "--decide", "abort"],
                ["kernel", "repl"], ["kernel", "step", "--packet", "flow.yaml"])  # fmt: skip
    for command in commands:
        refused = subprocess.run([sys.executable, "-m", "groundstate", *command, "--config", "broken.toml"],
                                 cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert refused.returncode == 2, command
        assert "broken.toml:2: models.nope" in refused.stdout + refused.stderr, command


PARALLEL = """
name: parallel
agents:
  - id: writer_a
    instructions: One.
  - id: writer_b
    instructions: Two.
"""


@pytest.mark.parametrize("shards", [1, 2])
def test_max_concurrent_shards_bounds_the_agents_at_work(
    tmp_path: Path, model: tuple[str, Script], shards: int
) -> None:
    url, script = model
    script.answers = {a: [envelope("Done. [STATUS: SUCCESS]")] for a in ("writer_a", "writer_b")}
    script.delays = {"writer_a": 0.5, "writer_b": 0.5}
    runtime = settings(tmp_path, f"[limits.core_limits]\nmax_concurrent_shards = {shards}\n")
    runtime._backend = make_backend(f"openai-chat:scripted@{url}")
    run_id = runtime.create(PARALLEL, "p.yaml")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    order = [(e.type, e.agent) for e in runtime.store.events(run_id) if e.type in ("AgentStarted", "AgentCompleted")]
    first_done = order.index(next(item for item in order if item[0] == "AgentCompleted"))
    started_before = sum(1 for kind, _ in order[:first_done] if kind == "AgentStarted")
    assert started_before == shards  # one at a time, or both at once


CONTENT_RULES = """
competitor("Acme").
mentions_competitor(R, A) :- agent_output(R, A, T), competitor(C), :string:contains(T, C).
needs_approval(R, A, /quality, "the answer mentions a competitor") :- mentions_competitor(R, A).
needs_approval(R, A, /safety, "a password is about to be written") :-
  tool_content(R, A, _, T), :string:contains(T, "password").
needs_approval(R, A, /quality, "a very long answer") :- agent_output_digest(R, A, _).
needs_approval(R, A, /quality, "answered by the main model") :- agent_model(R, A, M), :string:contains(M, ":main@").
"""


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (envelope("Acme is cheaper. [STATUS: SUCCESS]"), "the answer mentions a competitor"),
        (envelope("W.", [{"tool": "write_file", "argument": "a.txt", "content": "password=1"}]),
         "a password is about to be written"),
        (envelope("x" * 20_000 + " [STATUS: SUCCESS]"), "a very long answer"),
    ],
)  # fmt: skip
def test_guards_see_output_content_and_model(
    tmp_path: Path, model: tuple[str, Script], answer: dict[str, object], reason: str
) -> None:
    url, script = model
    script.answers = {"writer_a": [answer, envelope("Done. [STATUS: SUCCESS]")]}
    (tmp_path / "content.mg").write_text(CONTENT_RULES)
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:other@{url}"\n[policy]\nguards = ["content.mg"]\n')
    run_id = runtime.create(FLOW, "cfg.yaml")
    state = asyncio.run(runtime.drive(run_id))
    assert state.pause is not None and state.pause.reason == reason
    assert not (runtime.home / "runs" / run_id / "workspace" / "a.txt").exists()
    by_model = settings(tmp_path, f'[models]\ndefault = "openai-chat:main@{url}"\n[policy]\nguards = ["content.mg"]\n')
    script.answers = {"writer_a": [envelope("Fine. [STATUS: SUCCESS]")]}
    paused = asyncio.run(by_model.drive(by_model.create(FLOW, "cfg.yaml")))
    assert paused.pause is not None and paused.pause.reason == "answered by the main model"


def test_the_invocation_kernel_is_bounded_by_its_profile(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("W.", [{"tool": "write_file", "argument": "a.txt", "content": "x"}]),
                                   envelope("Done. [STATUS: SUCCESS]")]}  # fmt: skip
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n'
                                 "[limits.shard_profiles.writer]\nmax_facts_in_shard_kernel = 3\n")  # fmt: skip
    run_id = runtime.create(FLOW, "cfg.yaml")
    state = asyncio.run(runtime.drive(run_id))
    assert state.pause is not None and "is 3" in (state.nodes["writer_a"].error or "")
    assert not (runtime.home / "runs" / run_id / "workspace" / "a.txt").exists()
    roomy = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n')
    assert asyncio.run(roomy.drive(roomy.create(FLOW, "cfg.yaml"))).status == "completed"


def test_a_shard_profiles_model_and_temperature_reach_the_provider(
    tmp_path: Path, model: tuple[str, Script], other: tuple[str, list[dict[str, object]]]
) -> None:
    url, script = model
    other_url, seen = other
    script.answers = {"writer_a": [envelope("Done. [STATUS: SUCCESS]")]}
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n')
    asyncio.run(runtime.drive(runtime.create(FLOW, "cfg.yaml")))
    assert "temperature" not in script.requests[-1][1]  # not configured: the provider's default
    tuned = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n'
                               "[limits.shard_profiles.writer]\ntemperature = 0.7\n")  # fmt: skip
    asyncio.run(tuned.drive(tuned.create(FLOW, "cfg.yaml")))
    assert script.requests[-1][1]["temperature"] == 0.7
    profile = f'[limits.shard_profiles.writer]\nmodel = "openai-chat:other@{other_url}"\n'
    profiled = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n' + profile)
    asyncio.run(profiled.drive(profiled.create(FLOW, "cfg.yaml")))
    assert len(seen) == 1 and seen[0]["model"] == "other"


def with_usage(answer: dict[str, object], prompt: int, completion: int) -> bytes:
    """The answer as an OpenAI-style stream that ends with a usage chunk, as providers send it."""
    usage = {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
    body = sse(json.dumps(answer))
    return body.replace(b"data: [DONE]", b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]")


TWO = """
name: budget
agents:
  - id: writer_a
    instructions: Draft.
  - id: writer_b
    instructions: Polish.
    depends_on: [writer_a]
"""


def test_usage_is_accounted_and_a_token_budget_pauses_the_run(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [with_usage(envelope("Draft. [STATUS: SUCCESS]"), 300, 200)],
                      "writer_b": [with_usage(envelope("Final. [STATUS: SUCCESS]"), 400, 300)]}  # fmt: skip
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n[budgets]\nmax_tokens = 1000\n')
    run_id = runtime.create(TWO, "b.yaml")
    state = asyncio.run(runtime.drive(run_id))
    completed = next(e for e in runtime.store.events(run_id) if e.type == "AgentCompleted")
    assert (completed.agent, completed.payload["usage"]["input_tokens"]) == ("writer_a", 300)
    assert state.nodes["writer_a"].status == "succeeded"  # 500 tokens: within the budget
    assert state.pause is not None and state.pause.agent == "writer_b"
    assert state.pause.reason == "The run's token budget is spent: 1200 tokens used of 1000."
    assert state.usage["input_tokens"] == 700 and state.usage["output_tokens"] == 500
    unlimited = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n')
    assert asyncio.run(unlimited.drive(unlimited.create(TWO, "b.yaml"))).status == "completed"


def test_a_time_budget_pauses_the_run(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Draft. [STATUS: SUCCESS]")]}
    script.delays = {"writer_a": 1.2}
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n[budgets]\nmax_model_seconds = 1\n')
    state = asyncio.run(runtime.drive(runtime.create(FLOW, "t.yaml")))
    assert state.pause is not None
    assert re.fullmatch(r"The run's time budget is spent: [2-9] s in attempts of 1 s\.", state.pause.reason)


def test_serve_starts_runs_on_the_configured_default_model(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Done. [STATUS: SUCCESS]")]}
    (tmp_path / "g.toml").write_text(f'[models]\ndefault = "openai-chat:m@{url}"\n')
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    server = subprocess.Popen([sys.executable, "-m", "groundstate", "serve", "--port", str(port), "--config", "g.toml"],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        client = console_client(port, tmp_path / "home")
        run_id = client.post("/api/runs", json={"workflow": FLOW}).json()["run_id"]
        for _ in range(300):
            run = client.get(f"/api/runs/{run_id}").json()
            if run["status"] == "completed":
                break
            time.sleep(0.1)
        assert run["model"] == f"openai-chat:m@{url}" and run["status"] == "completed"
        assert [agent for agent, _ in script.requests] == ["writer_a"]
        assert [row["run_id"] for row in client.get("/api/runs").json()] == [run_id]  # the same name as POST's
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_failed_attempts_tokens_count_once(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    rejected: dict[str, object] = {"not": "an envelope"}  # the packet gate rejects it: a hard error, after 400 tokens
    script.answers = {"writer_a": [with_usage(rejected, 300, 100)]}
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n[budgets]\nmax_tokens = 600\n')
    run_id = runtime.create(FLOW, "f.yaml")
    state = asyncio.run(runtime.drive(run_id))
    assert state.pause is not None and "rejected by the packet gate" in (state.nodes["writer_a"].error or "")
    assert state.usage["input_tokens"] == 300 and state.usage["output_tokens"] == 100
    assert not any("budget" in reason for reason in [state.pause.reason, *state.pause.others])  # 400 ≤ 600


ROLELESS = "name: roles\nagents:\n  - id: checker_a\n    instructions: Check it.\n    tools: [list_files]\n"


def test_configured_roles_are_enforced_and_pinned(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"checker_a": [envelope("Checked, without looking. [STATUS: SUCCESS]")]}
    text = f'[models]\ndefault = "openai-chat:main@{url}"\n[roles.checker_]\nmandatory_tools = ["list_files"]\n'
    runtime = settings(tmp_path, text)
    run_id = runtime.create(ROLELESS, "roles.yaml")  # no role of the shipped ones would accept checker_a
    assert runtime.store.events(run_id)[0].payload["policy"]["roles"][0]["prefix"] == "checker_"
    later = settings(tmp_path, f'[models]\ndefault = "openai-chat:main@{url}"\n')  # the role left the file since
    state = asyncio.run(later.drive(run_id))
    assert state.status == "awaiting_approval"
    assert "did not execute /list_files" in (state.pause.reason if state.pause else "")
    with pytest.raises(WorkflowError, match="must start with a role prefix"):
        later.create(ROLELESS, "roles.yaml")  # without the configured role, the shipped ones apply


def test_a_bad_role_name_is_refused_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "groundstate.toml").write_text('[roles."Bad-Role"]\nmandatory_tools = []\n')
    with pytest.raises(ConfigFileError, match=r"groundstate\.toml:1: roles\.Bad-Role: 'Bad-Role' is not an identifier"):
        load_config(tmp_path / "groundstate.toml")


def test_limits_are_pinned_with_the_run(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Late. [STATUS: SUCCESS]")]}
    script.delays = {"writer_a": 3.0}
    text = f'[models]\ndefault = "openai-chat:main@{url}"\n'
    strict = settings(tmp_path, text + "[limits.shard_profiles.writer]\nmax_execution_time_sec = 0.5\n")
    run_id = strict.create(FLOW, "cfg.yaml")
    lenient = settings(tmp_path, text)  # the file changed before the run was driven: the pin still applies
    state = asyncio.run(lenient.drive(run_id))
    assert "did not answer within 0.5 s" in (state.nodes["writer_a"].error or "")


def groundstate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env.pop("GROUNDSTATE_CONFIG", None)
    env.pop("GROUNDSTATE_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "groundstate", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_the_runs_commands_use_the_configured_store_and_repin(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Nothing found. [STATUS: NULL]")]}
    database = tmp_path / "elsewhere.db"
    (tmp_path / "team.toml").write_text(f'[models]\ndefault = "openai-chat:main@{url}"\n[store]\nurl = '
                                        f'"sqlite:///{database}"\n')  # fmt: skip
    runtime = Runtime(EventStore(f"sqlite:///{database}"), tmp_path / "home")
    run_id = runtime.create(FLOW, "cfg.yaml", f"openai-chat:main@{url}")
    asyncio.run(runtime.drive(run_id))
    listed = groundstate(tmp_path, "runs", "list", "--config", "team.toml")
    assert run_id in listed.stdout and "Semantic null" in listed.stdout, listed.stdout + listed.stderr
    assert run_id not in groundstate(tmp_path, "runs", "list").stdout  # the default store does not have it
    (tmp_path / "guards.mg").write_text('needs_approval(R, A, /quality, "always") :- finished(R, A).\n')
    with (tmp_path / "team.toml").open("a") as file:
        file.write('[policy]\nguards = ["guards.mg"]\n')
    repinned = groundstate(tmp_path, "runs", "repin", run_id, "--config", "team.toml")  # as the first admin
    assert repinned.returncode == 0 and "re-pinned: sha256:" in repinned.stdout, repinned.stdout + repinned.stderr
    decided = groundstate(tmp_path, "runs", "decide", run_id, "retry", "--config", "team.toml")
    assert decided.returncode == 0, decided.stdout + decided.stderr
    script.answers = {"writer_a": [envelope("Found it. [STATUS: SUCCESS]")]}
    resumed = groundstate(tmp_path, "runs", "resume", run_id, "--config", "team.toml")
    assert resumed.returncode == 3 and "always" in resumed.stdout  # the re-pinned guard file applies
    events = runtime.store.events(run_id)
    assert [e.actor for e in events if e.type == "PolicyRepinned"] == ["operator:admin"]


def test_retention_archives_an_agents_settled_actions_during_the_run(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.by_round = True
    write = [{"tool": "write_file", "argument": f"note{i}.txt", "content": "x"} for i in range(3)]
    script.answers = {"writer_a": [envelope("Writing.", write), envelope("Again.", write[:1]),
                                   envelope("Done. [STATUS: SUCCESS]")]}  # fmt: skip
    text = f'[models]\ndefault = "openai-chat:m@{url}"\n[limits.core_limits]\nmax_action_log = 2\n'
    runtime = settings(tmp_path, text)
    run_id = runtime.create(FLOW, "cfg.yaml")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "completed", state.pause
    completed = next(e for e in runtime.store.events(run_id) if e.type == "AgentCompleted")
    assert completed.payload["archived"] == 4  # 6 actions (each turn's intent and its writes), at most 2 kept
    cold = runtime.home / "runs" / run_id / "kernel" / "writer_a-actions.sqlite"
    rows = sqlite3.connect(cold).execute("SELECT target, status FROM action_log ORDER BY number").fetchall()
    assert [target for target, _ in rows] == ["codebase", "note0.txt", "note1.txt", "note2.txt"]
    assert [status for target, status in rows if target.startswith("note")] == ["/success"] * 3
    (tmp_path / "l").mkdir()
    lenient = settings(tmp_path / "l", text.replace("max_action_log = 2", "max_action_log = 500"))
    run_id = lenient.create(FLOW, "cfg.yaml")
    asyncio.run(lenient.drive(run_id))
    assert "archived" not in next(e for e in lenient.store.events(run_id) if e.type == "AgentCompleted").payload


def test_disabling_a_shipped_breaker_or_pattern_is_explicit_and_pinned(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Nothing found. [STATUS: NULL]")]}
    base = f'[models]\ndefault = "openai-chat:m@{url}"\n'
    assert asyncio.run(settings(tmp_path, base).drive(settings(tmp_path, base).create(FLOW, "c.yaml"))).pause
    relaxed = settings(tmp_path, base + '[policy]\ndisable_guards = ["semantic_null"]\n')
    run_id = relaxed.create(FLOW, "c.yaml")
    assert "guard_disabled(/semantic_null)." in relaxed.store.events(run_id)[0].payload["policy"]["guards"]
    assert asyncio.run(settings(tmp_path, base).drive(run_id)).status == "completed"  # pinned: another file later
    with pytest.raises(ConfigurationError, match="disable_guards: semantic_nul: no shipped breaker has that name"):
        settings(tmp_path, base + '[policy]\ndisable_guards = ["semantic_nul"]\n')
    deleting = FLOW.replace("[write_file]", "[delete_file]")
    script.answers = {"writer_a": [envelope("Cleaning.", [{"tool": "delete_file", "argument": "old.txt"}])]}
    state = asyncio.run(settings(tmp_path, base).drive(settings(tmp_path, base).create(deleting, "d.yaml")))
    assert state.pause is not None and state.pause.category == "safety"
    unguarded = settings(tmp_path, base + '[policy]\ndisable_patterns = ["guard_file_deletion"]\n')
    assert "guard_file_deletion" not in {p.id for p in unguarded.policy.patterns}
    state = asyncio.run(unguarded.drive(unguarded.create(deleting, "d.yaml")))
    assert state.pause is None or state.pause.category != "safety"  # no deletion pause: the call went on
    assert state.nodes["writer_a"].tools[0]["reason"] != HELD_FOR_OPERATOR  # to the kernel, which decided it
    with pytest.raises(ConfigurationError, match="disable_patterns: guard_nothing: no shipped pattern"):
        settings(tmp_path, base + '[policy]\ndisable_patterns = ["guard_nothing"]\n')


def test_a_configured_roles_description_reaches_the_prompt(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"checker_a": [envelope("[BYPASS: nothing to list] Checked. [STATUS: SUCCESS]")]}
    role = '[roles.checker_]\nmandatory_tools = ["list_files"]\ndescription = "audits the workspace"\n'
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n' + role)
    asyncio.run(runtime.drive(runtime.create(ROLELESS, "roles.yaml")))
    system = str(script.requests[0][1]["messages"][0]["content"])
    assert "- 'checker_': you MUST use `list_files` (audits the workspace)" in system


HOG = "name: hog\nagents:\n  - id: coder_a\n    instructions: Compute.\n    tools: [execute_python]\n"


@pytest.mark.parametrize(("limits", "fails"), [
    ("", False),
    ("[limits.core_limits]\nmax_total_memory_mb = 200\n", True),
    ("[limits.shard_profiles.coder]\nmax_memory_mb = 200\n", True),
])  # fmt: skip
def test_executor_memory_follows_the_configured_limits(
    tmp_path: Path, model: tuple[str, Script], limits: str, fails: bool
) -> None:
    url, script = model
    script.by_round = True
    code = [{"tool": "execute_python", "argument": "x = bytearray(300 * 1024 * 1024)\nprint('allocated')"}]
    script.answers = {"coder_a": [envelope("Computing.", code), envelope("Done. [STATUS: SUCCESS]")]}
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n' + limits)
    state = asyncio.run(runtime.drive(runtime.create(HOG, "hog.yaml")))
    [call] = state.nodes["coder_a"].tools
    assert ("MemoryError" in call["output"]) is fails and ("allocated" in call["output"]) is not fails, call


def test_a_packet_cannot_choose_looser_limits(tmp_path: Path, model: tuple[str, Script]) -> None:
    """Attack: the model names another shard type in execution_metadata to run its code under that profile's
    larger memory; the agent's own profile still applies."""
    url, script = model
    script.by_round = True
    code = [{"tool": "execute_python", "argument": "x = bytearray(300 * 1024 * 1024)\nprint('allocated')"}]
    escalate = envelope("Computing.", code, execution_metadata={"shard_type": "main"})
    script.answers = {"coder_a": [escalate, envelope("Done. [STATUS: SUCCESS]")]}
    runtime = settings(tmp_path, f'[models]\ndefault = "openai-chat:m@{url}"\n'
                                 "[limits.shard_profiles.coder]\nmax_memory_mb = 200\n"
                                 "[limits.shard_profiles.main]\nmax_memory_mb = 2048\n")  # fmt: skip
    state = asyncio.run(runtime.drive(runtime.create(HOG, "hog.yaml")))
    [call] = state.nodes["coder_a"].tools
    assert "MemoryError" in call["output"] and "allocated" not in call["output"]
