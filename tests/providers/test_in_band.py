"""The gateway relays a stream's events whole (``WholeEvents``), so that an error it tells in band is an event of
its own: nothing is lost or reordered, each piece given on ends where an event ends, and a stream that never ends
an event costs what it sends (it once cost its square: the suite stalled on one)."""

from __future__ import annotations

import json
import time

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
