"""Limits that hold in a run: a provider that does not answer in the shard profile's time is a hard error of the
agent (a pause with the reason), never a hung run."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from groundstate.kernel import KernelConfig
from groundstate.runtime import EventStore, LocalBackend, Runtime, make_backend

from .conftest import Script, envelope

FLOW = "name: slow\nagents:\n  - id: writer_a\n    instructions: Write it.\n"


def test_a_hung_provider_times_out_as_a_hard_error(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Late. [STATUS: SUCCESS]")]}
    script.delays = {"writer_a": 5.0}  # the provider sits on the request
    config = KernelConfig.model_validate({"shard_profiles": {"writer": {"max_execution_time_sec": 0.5}}})
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 't.db'}"), tmp_path,
                      backend=make_backend(f"openai-chat:scripted@{url}"), config=config)  # fmt: skip
    run_id = runtime.create(FLOW, "slow.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))
    node = state.nodes["writer_a"]
    assert node.status == "paused" and state.status == "awaiting_approval"
    assert "did not answer within 0.5 s" in (node.error or "")


def test_the_default_profile_lets_a_prompt_answer_finish(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("On time. [STATUS: SUCCESS]")]}
    script.delays = {"writer_a": 1.0}
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'd.db'}"), tmp_path,
                      backend=make_backend(f"openai-chat:scripted@{url}"))  # fmt: skip
    state = asyncio.run(runtime.drive(runtime.create(FLOW, "slow.yaml", "scripted")))
    assert state.status == "completed"


def test_a_timeout_stops_the_local_models_generation() -> None:
    """The local model generates in a thread; when the model call times out, that thread stops at its next token
    and frees the model, instead of generating on for nobody (the grammar demands 300 numbers: 600+ tokens)."""
    backend = LocalBackend(max_tokens=3000)
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 300}

    async def call() -> int:
        pieces = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60.0) as deadline:  # loading the model and the prompt: not the time measured
                async for _ in backend.stream([{"role": "user", "content": "List numbers."}], schema):
                    pieces += 1
                    if pieces == 1:  # generating: the call times out half a second from now, mid-answer
                        deadline.reschedule(asyncio.get_running_loop().time() + 0.5)
        return pieces

    pieces = asyncio.run(call())
    assert backend.worker is not None
    backend.worker.join(timeout=120)
    assert not backend.worker.is_alive() and 0 < backend.model.completion_tokens < 300 and pieces > 0
