"""A run keeps the policy it was created under: a custom safety rule still applies after a decision and a resume
by another process that has no patterns file, a user file adds to the shipped guards, a tampered pin is refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from groundstate.config import KernelConfig
from groundstate.runtime import (
    AGENT_STARTED,
    POLICY_REPINNED,
    RUN_CREATED,
    DecisionError,
    EventStore,
    LeaseHeld,
    PinnedPolicy,
    PolicyPinError,
    Role,
    Runtime,
    body_of,
    make_backend,
)

from .conftest import Script, envelope

FLOW = """
name: pinned
agents:
  - id: coder_x
    instructions: Write the report.
    tools: [execute_python, write_file, delete_file]
"""
SECRET_WRITE = [{"tool": "write_file", "argument": "secret-plan.txt", "content": "the plan"}]
REASON = "A file named secret is about to be written."


def custom_patterns(tmp_path: Path) -> Path:
    path = tmp_path / "patterns.json"
    path.write_text(json.dumps([{
        "id": "no_secret_files", "name": "No secret files", "trigger_event": "ToolCall", "category": "safety",
        "condition": 'tool_call(Run, Agent, Seq, /write_file, Target), :string:contains(Target, "secret")',
        "action": {"RequestApproval": {"reason": REASON}},
    }]))  # fmt: skip
    return path


def runtime_for(tmp_path: Path, url: str, patterns: Path | None) -> Runtime:
    store = EventStore(f"sqlite:///{tmp_path / 'pinned.db'}")
    backend = make_backend(f"openai-chat:scripted@{url}")
    return Runtime(store, tmp_path / "home", backend=backend, patterns_path=patterns)


def test_a_custom_rule_still_applies_after_a_decision_and_a_resume_elsewhere(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    other_write = [{"tool": "write_file", "argument": "secret-notes.txt", "content": "more"}]
    script.answers = {"coder_x": [envelope("Writing.", SECRET_WRITE), envelope("Writing.", other_write)]}
    creator = runtime_for(tmp_path, url, custom_patterns(tmp_path))
    run_id = creator.create(FLOW, "pinned.yaml", "scripted")
    state = asyncio.run(creator.drive(run_id))
    assert state.pause is not None and state.pause.reason == REASON
    created = creator.store.events(run_id)[0]
    assert created.type == RUN_CREATED and created.payload["policy"]["digest"].startswith("sha256:")

    elsewhere = runtime_for(tmp_path, url, None)  # another process, started without the patterns file
    assert "no_secret_files" not in {p.id for p in elsewhere.policy.patterns}
    elsewhere.decide(run_id, "retry")  # approves the held write, that exact call only
    state = asyncio.run(elsewhere.drive(run_id))
    assert state.status == "awaiting_approval" and state.pause is not None and state.pause.reason == REASON
    workspace = elsewhere.home / "runs" / run_id / "workspace"
    assert not (workspace / "secret-notes.txt").exists()  # the pinned rule held the new write: it never ran


def test_a_user_patterns_file_adds_to_the_shipped_guards(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    runtime = runtime_for(tmp_path, url, custom_patterns(tmp_path))
    ids = [p.id for p in runtime.policy.patterns]
    assert "guard_file_deletion" in ids and ids[-1] == "no_secret_files"
    script.answers = {"coder_x": [envelope("Cleaning.", [{"tool": "delete_file", "argument": "keep.txt"}])]}
    run_id = runtime.create(FLOW, "pinned.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))
    assert state.pause is not None and state.pause.reason.startswith("The agent asked to delete a file.")


def test_a_tampered_pin_is_refused(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"coder_x": [envelope("Writing.", SECRET_WRITE)]}
    runtime = runtime_for(tmp_path, url, custom_patterns(tmp_path))
    pinned = runtime.store.events(runtime.create(FLOW, "pinned.yaml", "scripted"))
    # Someone who can write the store adds a run through groundstate's own store (so its chain holds: an edit in
    # place is refused by the chain, tests/runtime/test_changed_logs.py) with the custom rule taken out of the pin
    # and the digest left as it was.
    payload = pinned[0].payload
    payload["policy"]["patterns"] = payload["policy"]["patterns"][:-1]
    run_id = runtime.store.create_run(payload["name"], payload["workflow"], payload["model"], policy=payload["policy"])
    for created in pinned[1:]:
        runtime.store.append(run_id, body_of(created.type, created.payload), created.agent)
    fresh = runtime_for(tmp_path, url, custom_patterns(tmp_path))
    state = asyncio.run(fresh.drive(run_id))
    assert state.status == "failed" and "does not match its digest" in (state.outcome or "")
    assert not (fresh.home / "runs" / run_id / "workspace" / "secret-plan.txt").exists()
    assert AGENT_STARTED not in [e.type for e in fresh.store.events(run_id)]


def test_the_digest_covers_guards_and_patterns() -> None:
    shipped = PinnedPolicy.of("a(1).", [])
    assert PinnedPolicy.of("a(2).", []).digest != shipped.digest
    assert PinnedPolicy.from_json(shipped.to_json(), "r") == shipped


def test_repinning_is_an_explicit_logged_action(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"coder_x": [envelope("[BYPASS: a write, no code] Writing. [STATUS: SUCCESS]", SECRET_WRITE)]}
    creator = runtime_for(tmp_path, url, custom_patterns(tmp_path))
    run_id = creator.create(FLOW, "pinned.yaml", "scripted")
    asyncio.run(creator.drive(run_id))
    old = creator.store.state(run_id).policy["digest"]  # type: ignore[index]
    operator = runtime_for(tmp_path, url, None)  # the policy on disk no longer has the custom rule
    holder = "someone-else"
    operator.store.acquire_lease(run_id, holder, 30)
    with pytest.raises(LeaseHeld):  # a run being driven is not re-pinned under its driver's feet
        operator.repin(run_id, "alice")
    operator.store.release_lease(run_id, holder)
    state = operator.repin(run_id, "alice")
    repinned = operator.store.events(run_id)[-1]
    assert repinned.type == POLICY_REPINNED and repinned.actor == "alice" and repinned.payload["previous"] == old
    assert state.policy is not None and state.policy["digest"] == operator.policy.digest != old
    assert state.status == "awaiting_approval"  # re-pinning decides nothing
    operator.decide(run_id, "retry")
    state = asyncio.run(operator.drive(run_id))
    assert state.status == "completed", state.pause  # under the new pin, the write is no longer held
    assert (operator.home / "runs" / run_id / "workspace" / "secret-plan.txt").read_text() == "the plan"
    with pytest.raises(DecisionError, match="only a pending, paused or failed run"):
        operator.repin(run_id)


def test_the_digest_covers_roles_and_limits() -> None:
    plain = PinnedPolicy.of("a(1).", [])
    limited = PinnedPolicy.of("a(1).", [], None, KernelConfig())
    roles = PinnedPolicy.of("a(1).", [], [Role(prefix="checker_", mandatory_tools=["list_files"])], KernelConfig())
    assert len({plain.digest, limited.digest, roles.digest}) == 3
    assert PinnedPolicy.from_json(roles.to_json(), "r") == roles
    tampered = roles.to_json()
    tampered["limits"]["core_limits"]["max_output_chars"] = 1
    with pytest.raises(PolicyPinError, match="does not match its digest"):
        PinnedPolicy.from_json(tampered, "r")
