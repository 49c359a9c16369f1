"""Transactions, limits, context frames, the drift linter, explanations and the kernel CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from groundstate.kernel import EXECUTORS, CoreLimits, Kernel, KernelConfig, KernelLimitError, why
from groundstate.kernel import lint_policy as lint
from groundstate.logic import EvaluationError, Name
from tests.trusted import trusted


def test_a_transaction_is_one_evaluation(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path)
    with kernel.transaction() as tx:
        tx.assert_("known_action", (Name("/a"),), (Name("/b"),))
        tx.retract("known_action", (Name("/a"),))
    assert kernel.query("known_action(/b)") and not kernel.query("known_action(/a)")
    assert kernel.last_stats.mode == "incremental"


def test_fact_limit_refuses_the_whole_transaction(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path)
    limit = kernel.fact_count() + 2
    kernel.config = KernelConfig(core_limits=CoreLimits(max_facts_in_kernel=limit))
    with pytest.raises(KernelLimitError, match="max_facts_in_kernel"):
        kernel.assert_facts("task_status", *[(Name(f"/t{i}"), Name("/pending")) for i in range(3)])
    assert kernel.query("task_status(T, S)") == []


def test_fact_limit_refuses_a_supposition_too(tmp_path: Path) -> None:
    """A question asked with supposed facts (the decision path) is bounded like a transaction: a flood of facts
    in one tools/call's arguments is refused, and nothing of it stays."""
    kernel = Kernel(tmp_path)
    kernel.config = KernelConfig(core_limits=CoreLimits(max_facts_in_kernel=kernel.fact_count() + 2))
    flood = [("task_status", (Name(f"/t{i}"), Name("/pending"))) for i in range(3)]
    refused = pytest.raises(KernelLimitError, match=r"the supposed facts would bring the kernel to \d+ facts")
    with refused, kernel.supposing(flood):
        pass
    with kernel.supposing(flood[:2]):
        assert len(kernel.query("task_status(T, S)")) == 2
    assert kernel.query("task_status(T, S)") == []


def test_derived_fact_limit_rolls_back(tmp_path: Path) -> None:
    policy = tmp_path / "explode.mg"
    policy.write_text("Decl pair(A, B) bound [/name, /name].\npair(A, B) :- task_status(A, _), task_status(B, _).\n")
    config = KernelConfig(core_limits=CoreLimits(max_derived_facts_limit=150))
    kernel = Kernel(tmp_path, config=config, extra_sources=[policy])
    kernel.assert_facts("task_status", *[(Name(f"/t{i}"), Name("/pending")) for i in range(5)])  # 25 pairs: fine
    with pytest.raises(EvaluationError):
        kernel.assert_facts("task_status", *[(Name(f"/u{i}"), Name("/pending")) for i in range(10)])  # 225 pairs
    assert len(kernel.query("task_status(T, S)")) == 5 and len(kernel.query("pair(A, B)")) == 25


def test_frames_retract_exactly_their_own_facts(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path)
    kernel.assert_facts("task_status", (Name("/kept"), Name("/pending")))
    with kernel.frame() as frame:
        frame.assert_("task_status", (Name("/kept"), Name("/pending")), (Name("/scratch"), Name("/pending")))
        assert len(frame.query("task_status(T, S)")) == 2
    assert kernel.query("task_status(T, S)") == [(Name("/kept"), Name("/pending"))]


def test_the_shipped_policy_passes_the_drift_linter(tmp_path: Path) -> None:
    assert lint(Kernel(tmp_path), EXECUTORS) == []


def test_the_linter_finds_drift(tmp_path: Path) -> None:
    drift = tmp_path / "drift.mg"
    drift.write_text(
        "intent_action(/deploy, /deploy).\n"  # derivable, no route
        "known_action(/teleport). route(/teleport, /teleporter).\n"  # route without executor
        "action_alias(/ls, /list_files). route(/ls, /list_files).\n"  # alias with its own route
        "action_alias(/cat, /fs_read).\n"  # alias of an alias
    )
    executors = {**EXECUTORS, "orphan": EXECUTORS["read_file"]}
    found = {(f.code, f.message.split(" ")[0]) for f in lint(Kernel(tmp_path, extra_sources=[drift]), executors)}
    assert ("missing-route", "/deploy") in found
    assert ("missing-executor", "route(/teleport,") in found
    assert ("alias-drift", "/ls") in found and ("alias-drift", "/cat") in found
    assert ("dead-executor", "the") in found


def test_explanations_reach_asserted_facts(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path)
    kernel.assert_facts("pending_action", (Name("/action/1"), Name("/delete_file"), "a.txt", "", 1))
    tree = why(kernel, "permission_check_result(/action/1, D, R, T)").to_json()
    assert tree["fact"].startswith("permission_check_result(/action/1, /deny") and "policy.mg" in tree["how"]
    flat = json.dumps(tree)
    assert '"fact": "pending_action(/action/1, /delete_file, \\"a.txt\\", \\"\\", 1)", "how": "asserted"' in flat
    assert "!approved_action(/action/1)" in flat  # neither the user nor an operator's approval of the request
    assert why(kernel, "user_approved(/action/1)").how == "does not hold"
    assert why(kernel, "approved_action(/action/1)").how == "does not hold"


def groundstate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "groundstate", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_step_and_lint(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("print('hi')\n")
    packet = tmp_path / "packet.json"
    packet.write_text(json.dumps({"control_packet": {
        "intent_classification": {"category": "/query", "verb": "/explain", "target": "a.py", "confidence": 0.9},
        "tool_requests": [{"tool": "delete_file", "argument": "a.py"}]}, "surface_response": "hi"}))  # fmt: skip
    done = groundstate("kernel", "step", "--packet", str(packet), "--workspace", str(tmp_path))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [(a["type"], a["decision"]) for a in out["actions"]] == [
        ("/read_file", "/permit"),
        ("/delete_file", "/deny"),
    ]
    assert out["actions"][0]["output"] == "print('hi')\n" and out["phase"] == "/observe"
    assert any(f.startswith("awaiting_approval(/action/2") for f in out["facts"]["awaiting_approval"])
    assert groundstate("kernel", "lint").returncode == 0
    bad = tmp_path / "bad.mg"
    bad.write_text("intent_action(/deploy, /deploy).\n")
    done = groundstate("kernel", "lint", "--policy", str(bad))
    assert done.returncode == 1 and "missing-route" in done.stdout


def test_cli_repl(tmp_path: Path) -> None:
    script = "\n".join(["assert task_status(/t1, /pending)", "query task_status(T, S)", "assert nope(1)", "phase",
                        "explain current_ooda_phase(P)", "learn action_permitted(A) :- pending_action(A, _, _, _, _).",
                        'learn clarification_needed(I) :- user_intent(I, _, /guess, _, _).', "quit", ""])  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "GROUNDSTATE_CONFIG"} | {"GROUNDSTATE_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "groundstate", "kernel", "repl", "--workspace", str(tmp_path)],
                          input=script, capture_output=True, text=True, env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "task_status(/t1, /pending)" in done.stdout and "nope is not declared" in done.stdout
    assert "current_ooda_phase(/observe)  [derived by the rule at" in done.stdout
    assert "refused: it defines the protected predicate action_permitted" in done.stdout
    assert "accepted as learned rule 1, in quarantine for 5 runs" in done.stdout  # counted in runs: it is the
    assert "clarification_needed" in (tmp_path / "learned.mg").read_text()  # project's file, which runs load


def test_config_file_and_context_budget(tmp_path: Path) -> None:
    from groundstate.kernel import ContextBudgetError, check_context

    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "core_limits": {"max_facts_in_kernel": 1000},
                "shard_profiles": {"coder": {"max_context_tokens": 10, "max_execution_time_sec": 2}},
            }
        )
    )
    config = KernelConfig.load(path)
    assert config.core_limits.max_facts_in_kernel == 1000 and config.shard("coder").max_execution_time_sec == 2
    assert config.shard("unknown") == config.shard("main")  # no profile for it: the main one
    check_context(config.shard("coder"), "x" * 40)
    with pytest.raises(ContextBudgetError, match="exceed the shard's context budget of 10 tokens"):
        check_context(config.shard("coder"), "x" * 44)
    path.write_text(json.dumps({"core_limits": {"max_facts": 1}}))
    done = groundstate("kernel", "step", "--packet", str(path), "--config", str(path))
    assert done.returncode == 2 and "max_facts" in done.stderr


def test_lint_refuses_a_policy_where_a_model_fact_steers_a_decision(tmp_path: Path) -> None:
    """A user rule that lets a model-writable fact (here task_status, via a helper) deny or permit an action is
    reported: the model could otherwise steer the decision by stating a fact in mangle_updates."""
    risky = tmp_path / "risky.mg"
    risky.write_text("Decl urgent(T) bound [/name].\nurgent(T) :- task_status(T, /in_progress).\n"
                     'denied(A, "busy") :- pending_action(A, _, _, _, _), !urgent(/t1).\n')  # fmt: skip
    done = groundstate("kernel", "lint", "--policy", str(risky))
    assert done.returncode == 1
    assert "model-writable-decides: denied depends on task_status" in done.stdout
    safe = tmp_path / "safe.mg"
    safe.write_text('denied(A, "no deletes on Fridays") :- pending_action(A, /delete_file, _, _, _).\n')
    assert groundstate("kernel", "lint", "--policy", str(safe)).returncode == 0


def test_an_ambiguous_route_is_a_lint_error_and_routes_nothing(tmp_path: Path) -> None:
    """Two routes for one action: the linter names it, and the router takes neither (policy.mg: route_ambiguous)."""
    from groundstate.kernel import Request, Shards, VirtualStore
    from groundstate.packets import parse_output

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("secret\n")
    extra = tmp_path / "twice.mg"
    extra.write_text("route(/read_file, /search_files).\n"
                     "action_alias(/peek, /read_file).\naction_alias(/peek, /list_files).\n")  # fmt: skip
    kernel = Kernel(tmp_path / "ws", extra_sources=[extra])
    found = {(f.code, f.message.split(" ")[0]) for f in lint(kernel, EXECUTORS)}
    assert ("ambiguous-route", "/read_file") in found and ("ambiguous-route", "/peek") in found
    shards = Shards(kernel, VirtualStore(kernel.workspace))
    packet = parse_output('{"control_packet": {"intent_classification": {"category": "/query", "verb": "/explain", '
                          '"target": "codebase", "confidence": 0.9}, "mangle_updates": [], "memory_operations": []}, '
                          '"surface_response": "ok"}', kernel.update_validator())  # fmt: skip
    reports = shards.step(packet, [Request("/read_file", "a.txt")])
    [report] = [r for r in reports if r.source == shards.request_ids[0]]
    assert report.decision == "/permit" and report.status == "/failure" and report.executor is None
    assert report.output == "several routes for /read_file: the routing table must give exactly one"
    assert kernel.query(f"execution_result({report.action_id}, T, S, O, M)") == []


PROTECTED = (
    'requires_user_approval(A, "config is protected") :- '
    'pending_action(A, /write_file, Target, _, _), :string:starts_with(Target, "config/").\n'
)


def test_step_and_repl_take_the_users_policy(tmp_path: Path) -> None:
    """``--policy`` loads a rule file after the shipped ones, as in docs/kernel.md."""
    mine = tmp_path / "mine.mg"
    mine.write_text(PROTECTED)
    packet = tmp_path / "packet.json"
    packet.write_text(json.dumps({"control_packet": {
        "intent_classification": {"category": "/instruction", "verb": "/do", "confidence": 1.0},
        "tool_requests": [{"tool": "write_file", "argument": "config/app.toml", "content": "x = 1"}]}}))  # fmt: skip
    plain = json.loads(groundstate("kernel", "step", "--packet", str(packet), "--workspace", str(tmp_path)).stdout)
    assert plain["actions"][0]["decision"] == "/permit"
    (tmp_path / "config" / "app.toml").unlink()
    done = groundstate("kernel", "step", "--packet", str(packet), "--workspace", str(tmp_path), "--policy", str(mine))
    action = json.loads(done.stdout)["actions"][0]
    assert (action["decision"], action["reason"]) == ("/deny", "requires user approval: config is protected")
    assert not (tmp_path / "config" / "app.toml").exists()
    script = "assert pending_action(/action/1, /write_file, \"config/app.toml\", \"\", 0)\n" \
             "query requires_user_approval(A, R)\nquit\n"  # fmt: skip
    repl = subprocess.run([sys.executable, "-m", "groundstate", "kernel", "repl", "--workspace", str(tmp_path),
                           "--policy", str(mine)], input=script, capture_output=True, text=True)  # fmt: skip
    assert repl.returncode == 0, repl.stderr
    assert 'requires_user_approval(/action/1, "config is protected")' in repl.stdout
    missing = groundstate("kernel", "step", "--packet", str(packet), "--policy", str(tmp_path / "nope.mg"))
    assert missing.returncode == 2 and "nope.mg" in missing.stderr and "Traceback" not in missing.stderr


def test_step_reads_the_project_configuration(tmp_path: Path) -> None:
    """groundstate.toml in the working directory: ``policy.kernel`` adds rules, ``[limits]`` bound the turn."""
    (tmp_path / "mine.mg").write_text(PROTECTED)
    (tmp_path / "notes.txt").write_text("0123456789" * 3)
    packet = tmp_path / "packet.json"
    packet.write_text(json.dumps({"control_packet": {
        "intent_classification": {"category": "/instruction", "verb": "/do", "confidence": 1.0},
        "tool_requests": [{"tool": "write_file", "argument": "config/app.toml", "content": "x = 1"},
                          {"tool": "read_file", "argument": "notes.txt"}]}}))  # fmt: skip
    (tmp_path / "groundstate.toml").write_text(
        '[policy]\nkernel = ["mine.mg"]\n\n[limits.core_limits]\nmax_output_chars = 8\n'
    )
    trusted(tmp_path / "groundstate.toml")
    done = groundstate("kernel", "step", "--packet", "packet.json", "--workspace", ".", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    write, read = json.loads(done.stdout)["actions"]
    assert write["reason"] == "requires user approval: config is protected"
    assert read["output"].startswith("01234567\n[output cut at 8 of 30 characters]")
