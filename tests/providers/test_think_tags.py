"""Inline <think> tags: split tags, an omitted opening tag, empty thoughts, literal tags in answers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.providers import ThinkTags, merge_deltas, to_json

from ..pieces import split_at


def split(text: str, cuts: list[int], **options: bool) -> list[tuple[str, str]]:
    tags = ThinkTags(**options)
    out = [e for piece in split_at(text, cuts) for e in tags.feed(piece)] + tags.close()
    return [(e["type"], e["text"]) for e in map(to_json, merge_deltas(out))]


def test_thought_then_answer_with_tags_split_across_chunks() -> None:
    text = "<think>I should add.</think>The sum is 4."
    expected = [("think", "I should add."), ("text", "The sum is 4.")]
    for cut in range(len(text) + 1):
        assert split(text, [cut]) == expected, cut


def test_opening_tag_omitted() -> None:
    assert split("still thinking</think>Answer", [5, 15], opening_tag_omitted=True) == [
        ("think", "still thinking"),
        ("text", "Answer"),
    ]


def test_empty_thought_and_leading_whitespace() -> None:
    assert split("\n<think>\n\n</think>\n\nHello", [3]) == [("text", "\n"), ("think", "\n\n"), ("text", "\n\nHello")]


def test_a_literal_tag_inside_the_answer_is_text() -> None:
    text = "Use it like this: `<think>x</think>` in your template."
    assert split(text, [20, 23]) == [("text", text)]
    assert split(text, [], leading_only=False)[1] == ("think", "x")


def test_unclosed_thought_at_the_end_stays_thought() -> None:
    assert split("<think>cut off mid-thou", [10]) == [("think", "cut off mid-thou")]
    assert split("answer ends with <thi", [19]) == [("text", "answer ends with <thi")]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["<think>", "</think>", "<thi", "nk>", "</", "a", " ", "\n", "x<", "<", ">"]), max_size=15
    ),
    st.lists(st.integers(0, 200), max_size=8),
    st.booleans(),
    st.booleans(),
)
def test_any_split_gives_the_same_result(parts: list[str], cuts: list[int], omitted: bool, leading: bool) -> None:
    text = "".join(parts)
    options = {"opening_tag_omitted": omitted, "leading_only": leading}
    result = split(text, cuts, **options)
    assert result == split(text, [], **options)
    # nothing is lost: exactly the tags taken as boundaries are removed, opening and closing in turn
    removed = len(text) - len("".join(t for _, t in result))
    possible = {
        7 * a + 8 * b
        for a in range(text.count("<think>") + 1)
        for b in range(text.count("</think>") + 1)
        if (b - a in (0, 1) if omitted else a - b in (0, 1))
    }
    assert removed in possible
