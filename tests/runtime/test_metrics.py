"""The runtime's metrics: what happened in runs — created and ended, pauses, tool calls, decisions, model calls,
provider errors, tokens, packet-gate aborts — counted in the registry ``/metrics`` serves, read back with
prometheus_client's own parser."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from groundstate.runtime import EventStore, Runtime, make_backend

from .conftest import Script, envelope
from .test_configuration import with_usage

FLOW = "name: m\nagents:\n  - id: coder_a\n    instructions: Write it.\n    tools: [write_file, execute_python]\n"


def samples(runtime: Runtime) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(runtime.run_metrics.render())
            for s in family.samples}  # fmt: skip


def test_a_runs_events_and_model_calls_are_counted(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    write = [{"tool": "write_file", "argument": "a.txt", "content": "x"}]
    script.answers = {"coder_a": [with_usage(envelope("Writing.", write), 100, 20),
                                  envelope("No code. [STATUS: SUCCESS]"),
                                  (401, json.dumps({"error": {"message": "bad key", "code": "invalid_api_key"}})
                                   .encode()), "not a packet at all"]}  # fmt: skip
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'm.db'}"), tmp_path,
                      backend=make_backend(f"openai-chat:scripted@{url}"))  # fmt: skip
    run_id = runtime.create(FLOW, "m.yaml", "scripted")
    state = asyncio.run(runtime.drive(run_id))  # the write runs; no execute_python: a protocol violation
    assert state.status == "awaiting_approval"
    runtime.decide(run_id, "retry")
    asyncio.run(runtime.drive(run_id))  # the provider refuses the key: a hard error
    runtime.decide(run_id, "retry")
    asyncio.run(runtime.drive(run_id))  # the model's output is not a packet: the gate aborts the stream
    runtime.decide(run_id, "abort")
    seen = samples(runtime)
    model_name = f"openai-chat:scripted@{url}"
    calls = {labels: value for (name, labels), value in seen.items() if name == "groundstate_model_calls_total"}
    assert calls[(("model", model_name), ("outcome", "ok"), ("provider", "openai-chat"))] == 3
    assert calls[(("model", model_name), ("outcome", "error"), ("provider", "openai-chat"))] == 1
    assert seen[("groundstate_provider_errors_total", (("model", model_name), ("plane", "auth"),
                                                       ("provider", "openai-chat")))] == 1  # fmt: skip
    assert seen[("groundstate_model_tokens_total", (("direction", "input"), ("model", model_name),
                                                    ("provider", "openai-chat")))] == 100  # fmt: skip
    assert seen[("groundstate_tool_calls_total", (("decision", "permit"), ("tool", "write_file")))] == 1
    assert seen[("groundstate_pauses_total", (("category", "quality"),))] == 3
    assert seen[("groundstate_decisions_total", (("decision", "retry"),))] == 2
    assert seen[("groundstate_runs_total", (("status", "created"),))] == 1
    assert seen[("groundstate_runs_total", (("status", "aborted"),))] == 1
    assert seen[("stream_aborts_total", ())] == 1
