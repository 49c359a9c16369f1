"""Fallback models: tried in order only when a model fails before the first token of its reply (a refused
connection, an HTTP error, no answer in time); a model that already sent something and then fails is the agent's
hard error — the run never switches models mid-answer."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from groundstate.config import ProjectConfig
from groundstate.runtime import AGENT_COMPLETED, AGENT_FAILED, Event, EventStore, Runtime

from .conftest import Script

FLOW = "name: fb\nagents:\n  - id: writer_a\n    instructions: Write it.\n"


def closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"  # nobody listens once the probe is closed


def runtime_with(
    tmp_path: Path, primary: str, fallback: list[str], seconds: float | None = None, guards: Path | None = None
) -> Runtime:
    settings = ProjectConfig.model_validate({
        "models": {"default": primary, "fallback": fallback},
        **({"limits": {"shard_profiles": {"writer": {"max_execution_time_sec": seconds}}}} if seconds else {}),
        **({"policy": {"guards": [guards]}} if guards else {}),
    })  # fmt: skip
    return Runtime(EventStore(f"sqlite:///{tmp_path / 'fb.db'}"), tmp_path / "home", settings=settings)


def completed(runtime: Runtime, run_id: str) -> Event:
    return next(e for e in runtime.store.events(run_id) if e.type in (AGENT_COMPLETED, AGENT_FAILED))


def test_a_model_that_is_unreachable_hands_over_before_the_first_token(
    tmp_path: Path, other: tuple[str, list[dict[str, object]]]
) -> None:
    other_url, seen = other
    dead = f"openai-chat:gone@{closed_port()}"
    guards = tmp_path / "fallback.mg"  # a policy that wants to hear of every fallback: the fact is there to see
    guards.write_text("needs_approval(R, A, /quality, M) :- finished(R, A), model_fallback(R, A, M, _).\n")
    runtime = runtime_with(tmp_path, dead, [f"openai-chat:spare@{other_url}"], guards=guards)
    run_id = runtime.create(FLOW, "fb.yaml")
    assert runtime.store.events(run_id)[0].payload["fallback"] == [f"openai-chat:spare@{other_url}"]
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "awaiting_approval" and len(seen) == 1  # answered by the spare, paused by the policy
    assert state.pause is not None and state.pause.reason == dead
    assert state.nodes["writer_a"].output == "From the other model. [STATUS: SUCCESS]"
    failed = next(e for e in runtime.store.events(run_id) if e.type == AGENT_FAILED)  # the breaker tripped
    assert failed.payload["error"] == dead and "usage" in failed.payload


def test_the_answering_model_and_the_failed_ones_are_recorded(
    tmp_path: Path, other: tuple[str, list[dict[str, object]]]
) -> None:
    other_url, _ = other
    dead = f"openai-chat:gone@{closed_port()}"
    runtime = runtime_with(tmp_path, dead, [f"openai-chat:spare@{other_url}"])
    run_id = runtime.create(FLOW, "fb.yaml")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    event = completed(runtime, run_id)
    assert event.payload["model"] == f"openai-chat:spare@{other_url}"
    assert [f["model"] for f in event.payload["fallbacks"]] == [dead]


def test_an_http_error_and_a_timeout_before_any_token_hand_over_in_order(
    tmp_path: Path, model: tuple[str, Script], other: tuple[str, list[dict[str, object]]]
) -> None:
    url, script = model
    other_url, seen = other
    script.answers = {"writer_a": [(401, json.dumps({"error": {"message": "bad key", "code": "invalid_api_key"}})
                                    .encode())]}  # fmt: skip
    slow = f"openai-chat:slow@{url}"
    runtime = runtime_with(tmp_path, f"openai-chat:main@{url}", [slow, f"openai-chat:spare@{other_url}"], 1.0)
    script.delays = {"slow": 5.0}  # the slow model sits on the request past the profile's 1 s
    run_id = runtime.create(FLOW, "fb.yaml")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "completed" and len(seen) == 1
    failed = completed(runtime, run_id).payload["fallbacks"]
    assert [f["model"] for f in failed] == [f"openai-chat:main@{url}", slow]
    assert "bad key" in failed[0]["error"]
    assert [body["model"] for _, body in script.requests] == ["main", "slow"]


def test_a_model_that_fails_mid_answer_is_a_hard_error_not_a_switch(
    tmp_path: Path, model: tuple[str, Script], other: tuple[str, list[dict[str, object]]]
) -> None:
    url, script = model
    other_url, seen = other
    started = {"choices": [{"index": 0, "delta": {"content": '{"control_packet": {'}, "finish_reason": None}]}
    broken = {"error": {"message": "the server went away", "type": "server_error", "code": "invalid_request"}}
    body = b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in (started, broken))
    script.answers = {"writer_a": [body]}
    runtime = runtime_with(tmp_path, f"openai-chat:main@{url}", [f"openai-chat:spare@{other_url}"])
    state = asyncio.run(runtime.drive(runtime.create(FLOW, "fb.yaml")))
    assert state.status == "awaiting_approval" and seen == []  # the fallback was never asked
    assert "the server went away" in (state.nodes["writer_a"].error or "")


def test_a_model_that_refused_and_then_failed_is_a_hard_error_not_a_switch(
    tmp_path: Path, model: tuple[str, Script], other: tuple[str, list[dict[str, object]]]
) -> None:
    """A refusal is something the model sent: when it is followed by an error, the fallback is not asked — it was,
    and its clean answer then paused on the first model's refusal (found by an attack)."""
    url, script = model
    other_url, seen = other
    refused = {"choices": [{"index": 0, "delta": {"refusal": "I refuse (model A)"}, "finish_reason": None}]}
    broken = {"error": {"message": "the server went away", "type": "server_error", "code": "invalid_request"}}
    script.answers = {"writer_a": [b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in (refused, broken))]}
    runtime = runtime_with(tmp_path, f"openai-chat:main@{url}", [f"openai-chat:spare@{other_url}"])
    state = asyncio.run(runtime.drive(runtime.create(FLOW, "fb.yaml")))
    assert state.status == "awaiting_approval" and seen == []  # the fallback was never asked
