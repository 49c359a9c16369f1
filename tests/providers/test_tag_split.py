"""The shared tag splitter: segments independent of chunking, partial tags held and never lost."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from groundstate.providers.tag_split import Segment, TagSplitter

from ..pieces import split_at

texts = st.lists(st.sampled_from(["<t>", "</t>", "<", "</", "t", ">", "a", " ", "<t", "</t"]), max_size=30).map("".join)


def run(text: str, cuts: list[int], close_tag: str | None = "</t>") -> list[Segment]:
    splitter = TagSplitter("<t>", close_tag)
    segments = [s for chunk in split_at(text, cuts) for s in splitter.feed(chunk)]
    segments.append(splitter.close())
    merged: list[Segment] = []
    for side, piece in segments:  # adjacent text on the same side is one run, however it was cut
        if merged and merged[-1][0] == side and side in ("inside", "outside"):
            merged[-1] = (side, merged[-1][1] + piece)
        elif piece or side in ("opened", "closed"):
            merged.append((side, piece))
    return merged


@given(texts, st.lists(st.integers(0, 200), max_size=8))
def test_any_chunking_gives_the_same_segments(text: str, cuts: list[int]) -> None:
    assert run(text, cuts) == run(text, [])
    assert run(text, cuts, close_tag=None) == run(text, [], close_tag=None)


@given(texts)
def test_nothing_is_lost(text: str) -> None:
    tags = {"opened": "<t>", "closed": "</t>"}
    assert "".join(tags.get(side, piece) for side, piece in run(text, list(range(len(text))))) == text


def test_a_partial_tag_is_held_until_the_next_chunk_decides() -> None:
    splitter = TagSplitter("<t>", "</t>")
    assert splitter.feed("ab<") == [("outside", "ab")]
    assert splitter.feed("t>x</") == [("opened", ""), ("inside", "x")]
    assert splitter.feed("q") == [("inside", "</q")]
    assert splitter.close() == ("inside", "")


def test_the_callers_policy_decides_whether_a_tag_opens() -> None:
    splitter = TagSplitter("<t>", "</t>", opens_after=lambda before: not before.strip(), may_open=lambda: True)
    assert splitter.feed("text <t>x") == [("outside", "text <t>x")]
    closed = TagSplitter("<t>", "</t>", may_open=lambda: False)
    assert closed.feed("a<t") == [("outside", "a<t")]  # nothing held back when no tag may open
