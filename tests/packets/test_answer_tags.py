"""The tags of a surface answer, read in packets/: the last status counts, a bypass only at the very start."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groundstate.packets import AnswerTags, answer_tags


def test_the_last_status_tag_counts_and_none_is_missing() -> None:
    assert answer_tags("Found it. [STATUS: SUCCESS]") == AnswerTags("success", None)
    assert answer_tags("[status:null] then [STATUS: SUCCESS] then [ STATUS: NULL ]") == AnswerTags("success", None)
    assert answer_tags("Nothing. [STATUS:  null ]") == AnswerTags("null", None)
    assert answer_tags("No tag here. [STATUS: DONE]") == AnswerTags("missing", None)


def test_a_bypass_counts_only_at_the_start() -> None:
    assert answer_tags("  [BYPASS:  the data was given inline ] Done. [STATUS: SUCCESS]") == AnswerTags(
        "success", "the data was given inline"
    )
    assert answer_tags("Done. [BYPASS: later] [STATUS: SUCCESS]").bypass is None
    assert answer_tags("[BYPASS:]").bypass == ""


@pytest.mark.alone
def test_hostile_answers_are_read_in_linear_time() -> None:
    """A megabyte of near-tags (what a model could be talked into writing) is read at once, not backtracked over."""
    for hostile in ("[STATUS:" + " " * 1_000_000, "[BYPASS:" + "[" * 1_000_000, "[STATUS: SUCCES" * 70_000):
        started = time.perf_counter()
        assert answer_tags(hostile).status == "missing"
        assert time.perf_counter() - started < 2.0


@given(st.text(max_size=200))
def test_any_text_gives_one_of_three_statuses(text: str) -> None:
    tags = answer_tags(text)
    assert tags.status in ("success", "null", "missing")
    if tags.bypass is not None:  # only an answer that opens with the tag has one
        assert text.lstrip().startswith("[BYPASS:") and "]" not in tags.bypass
