"""The gateway relays a stream's events whole (``WholeEvents``), so that an error it tells in band is an event of
its own: nothing is lost or reordered, each piece given on ends where an event ends, and a stream that never ends
an event costs what it sends (it once cost its square: the suite stalled on one)."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groundstate.errors import GroundstateError
from groundstate.providers import WholeEvents, event_end, in_band_error

MAX_HELD = WholeEvents.MAX_HELD

ALPHABET = st.sampled_from([b"d", b"a", b":", b" ", b"\n", b"\r", b"{", b"}"])


@given(st.lists(st.lists(ALPHABET, max_size=12).map(b"".join), max_size=30), st.sampled_from(["openai-chat", "ollama"]))
def test_pieces_given_on_are_the_stream_unchanged_and_end_where_events_end(pieces: list[bytes], api: str) -> None:
    aligned = WholeEvents(api)
    given_on: list[bytes] = []
    seen = b""
    for piece in pieces:
        seen += piece
        out = aligned.take(piece)
        given_on.append(out)
        assert b"".join(given_on) == seen[: event_end(api, seen)]  # every whole event, and nothing after them
    assert b"".join(given_on) + aligned.rest() == b"".join(pieces)


@pytest.mark.alone
def test_a_stream_that_never_ends_an_event_costs_what_it_sends() -> None:
    aligned = WholeEvents("openai-chat")
    piece = b"data: x" * 5 + b"\n"  # lines, never a blank one
    started = time.monotonic()
    total = b"".join(aligned.take(piece) for _ in range((4 * MAX_HELD) // len(piece)))
    assert time.monotonic() - started < 5  # the quadratic version took minutes
    assert len(total) > 2 * MAX_HELD  # given on past the bound, as they are


def test_the_error_is_each_apis_own_event() -> None:
    error = GroundstateError("it broke")
    chat = in_band_error("openai-chat", error)
    assert chat.startswith(b"data: ") and json.loads(chat[6:])["error"]["message"] == "it broke"
    assert in_band_error("anthropic", error).startswith(b"event: error\ndata: ")
    assert json.loads(in_band_error("ollama", error)) == {"error": "it broke"}


@pytest.mark.parametrize("blank", [b"\n\n", b"\r\r", b"\r\n\r\n", b"\n\r\n", b"\n\r", b"\r\n\n", b"\r\n\r", b"\r\r\n"])
def test_a_blank_line_ends_an_event_whatever_line_endings_it_mixes(blank: bytes) -> None:
    """LF then CRLF, CRLF then LF, ...: each a blank line (the SSE format allows all three endings, mixed). Only the
    pure ones were seen: a stream mixing them was held until it ended, and lost whole on a break."""
    stream = b'data: {"a": 1}' + blank + b"data: {"
    assert event_end("openai-chat", stream) >= len(b'data: {"a": 1}') + 2
    aligned = WholeEvents("openai-chat")
    assert aligned.take(stream).startswith(b'data: {"a": 1}' + blank[:2])


def test_an_error_after_an_event_given_on_unfinished_is_an_event_of_its_own() -> None:
    """Past MAX_HELD an unfinished event is given on as it is; an error then followed its last bytes on the same
    line — inside its data, or swallowed whole by a comment line."""
    error = GroundstateError("it broke")
    for api, fresh in (("openai-chat", b"\n\n"), ("anthropic", b"\n\n"), ("ollama", b"\n")):
        aligned = WholeEvents(api)
        assert aligned.error(error) == in_band_error(api, error)  # between events: the error as it is
        assert aligned.take(b": " + b"A" * (MAX_HELD + 1))  # a comment line that never ends, given on
        assert aligned.error(error) == fresh + in_band_error(api, error)
        assert aligned.take(b"A" * 10) == b""  # more of it, held: what was given still ends mid-event
        assert aligned.error(error) == fresh + in_band_error(api, error)


BLANK_LINES = (b"\n\n", b"\r\r", b"\r\n\r\n", b"\n\r", b"\r\n\n", b"\r\n\r")  # written out here, not imported


@given(st.lists(ALPHABET, max_size=40).map(b"".join))
def test_where_the_whole_events_end_is_the_last_blank_lines_end(data: bytes) -> None:
    """Checked against the definition, one prefix at a time: the fast answer for bytes that end on a blank line
    (no search) must be the one the search gives."""
    last = max((i for i in range(len(data) + 1) if data[:i].endswith(BLANK_LINES)), default=0)
    assert event_end("openai-chat", data) == last
    assert event_end("ollama", data) == data.rfind(b"\n") + 1
