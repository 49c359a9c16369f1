"""The envelope schema constrains the embedded local model; its stream goes through the gate into the kernel."""

from __future__ import annotations

import json
from pathlib import Path

from groundstate.kernel import Kernel, Shards, VirtualStore
from groundstate.packets import ACCEPTED, PacketGate, json_schema
from groundstate.providers import LocalModel


def test_local_model_writes_envelopes_the_gate_accepts(tmp_path: Path) -> None:
    model = LocalModel(n_ctx=2048)
    kernel = Kernel(tmp_path)
    gate = PacketGate(kernel.update_validator())
    example = {"control_packet": {"intent_classification": {"category": "/query", "verb": "/explain",
               "target": "app.py", "constraint": "none", "confidence": 0.9}, "mangle_updates": [],
               "memory_operations": []}, "surface_response": "I will read app.py."}  # fmt: skip
    messages = [
        {
            "role": "system",
            "content": "Reply with one JSON object like this example, nothing else: " + json.dumps(example),
        },
        {"role": "user", "content": "List the files of the project."},
    ]
    shown: list[str] = []
    for token in model.tokens(messages, max_tokens=400, json_schema=json_schema(max_items=3, max_surface_chars=160)):
        shown += gate.feed(token.text)  # streamed token by token, as it is generated
    shown += gate.feed(model.tail_text)
    result = gate.close()
    assert model.finish_reason == "stop" and result.decision == ACCEPTED, result
    assert "".join(shown) == result.surface
    assert result.packet is not None and result.packet.packet is not None
    reports = Shards(kernel, VirtualStore(kernel.workspace)).step_gated(result)
    intent = result.packet.packet.intent_classification
    assert kernel.query("user_intent(/current_intent, C, V, T, X)")[0][2].text == intent.verb
    assert all(r.decision in ("/permit", "/deny") for r in reports)
