"""Tool calls written as text: Hermes <tool_call> spans and Mistral [TOOL_CALLS] arrays."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.providers import TextToolCalls, merge_deltas, to_json

from ..pieces import split_at


def run(text: str, cuts: list[int], style: str) -> list[dict[str, Any]]:
    parser = TextToolCalls(style)
    out = [e for piece in split_at(text, cuts) for e in parser.feed(piece)] + parser.close()
    return [to_json(e) for e in merge_deltas(out)]


HERMES = (
    'Let me check.<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>'
    '<tool_call>{"name": "search", "parameters": {"q": "x"}}</tool_call> Done.'
)
HERMES_EXPECTED = [
    {"type": "text", "text": "Let me check."},
    {"type": "tool_call", "id": None, "name": "read_file", "arguments": {"path": "a.py"}, "arguments_error": None},
    {"type": "tool_call", "id": None, "name": "search", "arguments": {"q": "x"}, "arguments_error": None},
    {"type": "text", "text": " Done."},
]


def test_hermes_calls_split_anywhere() -> None:
    for cut in range(len(HERMES) + 1):
        assert run(HERMES, [cut], "hermes") == HERMES_EXPECTED, cut


def test_mistral_array_to_the_end() -> None:
    text = 'Calling.[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": "{\\"y\\": 2}"}]'
    assert run(text, [12, 30], "mistral") == [
        {"type": "text", "text": "Calling."},
        {"type": "tool_call", "id": None, "name": "a", "arguments": {"x": 1}, "arguments_error": None},
        {"type": "tool_call", "id": None, "name": "b", "arguments": {"y": 2}, "arguments_error": None},
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('<tool_call>{"name": "a", "arguments": {"x": </tool_call>', "not valid JSON: Expecting value"),
        ("<tool_call>[1, 2]</tool_call>", "not a tool call object with a name"),
        ('<tool_call>{"name": "a", "arguments": {"x"', "the output ended inside a tool call"),
    ],
)
def test_broken_calls_are_reported_never_repaired(text: str, error: str) -> None:
    (event,) = run(text, [5], "hermes")
    assert event["type"] == "tool_call" and event["arguments"] is None and event["arguments_error"].startswith(error)


def test_text_that_only_looks_like_a_tag_start_is_text() -> None:
    assert run("a <tool_ca", [4], "hermes") == [{"type": "text", "text": "a <tool_ca"}]
    with pytest.raises(ValueError, match="style must be one of"):
        TextToolCalls("llama")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["<tool_call>", "</tool_call>", "<tool", "_call>", '{"name": "f"}', "x", "[TOOL_CALLS]", "[]"]),
        max_size=10,
    ),
    st.lists(st.integers(0, 200), max_size=6),
    st.sampled_from(["hermes", "mistral"]),
)  # fmt: skip
def test_any_split_gives_the_same_result(parts: list[str], cuts: list[int], style: str) -> None:
    text = "".join(parts)
    assert run(text, cuts, style) == run(text, [], style)
