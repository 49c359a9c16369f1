"""Provider events through SIGIL and back: the same text, thoughts, calls and errors arrive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.providers import (
    AnthropicAdapter,
    Event,
    Finish,
    LocalModel,
    SigilBridge,
    TextDelta,
    ThinkDelta,
    ToolCall,
    provider_api,
)
from groundstate.wire import (
    ByteVocabulary,
    Content,
    Decoder,
    Detokenizer,
    Mode,
    Reason,
    Reset,
    StreamEnd,
    UpstreamError,
)

TRANSCRIPTS = Path(__file__).parent / "transcripts" / "anthropic"


def decode(data: bytes) -> list[Any]:
    decoder = Decoder()
    return decoder.feed(data) + decoder.close()


def by_mode(chunks: list[object]) -> dict[Mode, str]:
    data: dict[Mode, bytes] = {}
    for chunk in chunks:
        if isinstance(chunk, Content):  # a frame may end inside a character: decoded once whole
            data[chunk.mode] = data.get(chunk.mode, b"") + bytes(chunk.tokens)
    return {mode: raw.decode() for mode, raw in data.items()}


def test_provider_stream_through_sigil() -> None:
    adapter = AnthropicAdapter()
    bridge = SigilBridge(ByteVocabulary())
    wire = b"".join(bridge.push(e) for e in adapter.feed((TRANSCRIPTS / "thinking-text-tools.sse").read_bytes()))
    wire += b"".join(bridge.push(e) for e in adapter.close()) + bridge.end()
    chunks = decode(wire)
    text = by_mode(chunks)
    assert text[Mode.THINK] == "The user wants the weather."
    assert text[Mode.TEXT] == "Checking now."
    calls = [json.loads(bytes(c.tokens)) for c in chunks if isinstance(c, Content) and c.mode == Mode.TOOL_CALL]
    assert calls == [
        {"id": "toolu_1", "name": "get_weather", "arguments": {"city": "Paris"}},
        {"id": "toolu_2", "name": "now", "arguments": {}},
    ]
    assert isinstance(chunks[-1], StreamEnd) and not any(isinstance(c, Reset) for c in chunks)


def test_errors_become_upstream_error_frames_and_truncation_is_marked() -> None:
    adapter = AnthropicAdapter()
    bridge = SigilBridge(ByteVocabulary())
    events = adapter.feed((TRANSCRIPTS / "overloaded-mid-stream.sse").read_bytes()) + adapter.close()
    chunks = decode(b"".join(bridge.push(e) for e in events))
    errors = [c for c in chunks if isinstance(c, UpstreamError)]
    assert [e.error["plane"] for e in errors] == ["overload"]
    assert [c.reason for c in chunks if isinstance(c, Reset)] == [Reason.UPSTREAM_ERROR]
    assert isinstance(chunks[-1], StreamEnd)


def test_local_model_tokens_through_sigil_with_its_own_vocabulary() -> None:
    model = LocalModel(n_ctx=512)
    bridge = SigilBridge(model.vocabulary)
    generated = list(model.tokens([{"role": "user", "content": "Name two colours."}], max_tokens=24))
    wire = b"".join(bridge.tokens(Mode.TEXT, [t.id]) for t in generated) + bridge.end()
    chunks = decode(wire)
    ids = [t for c in chunks if isinstance(c, Content) for t in c.tokens]
    assert ids == [t.id for t in generated]
    detok = Detokenizer(model.vocabulary)
    assert detok.feed(ids) + detok.close() == "".join(t.text for t in generated) + model.tail_text


def _reads(events: list[Any], sizes: list[int]) -> list[list[Any]]:
    """The events split into consecutive reads of the given sizes (the last read takes the rest)."""
    reads, at = [], 0
    for size in sizes:
        reads.append(events[at : at + size])
        at += size
    return [*reads, events[at:]]


def _decoded(chunks: list[Any]) -> tuple[dict[Mode, str], list[Any], list[Any]]:
    calls = [json.loads(bytes(c.tokens)) for c in chunks if isinstance(c, Content) and c.mode == Mode.TOOL_CALL]
    text: dict[Mode, str] = {mode: t for mode, t in by_mode(chunks).items() if mode != Mode.TOOL_CALL}
    errors = [c.error["plane"] for c in chunks if isinstance(c, UpstreamError)]
    return text, calls, errors


def test_push_many_frames_a_read_together_and_the_decoder_reads_the_same_stream() -> None:
    """The events of one read in one frame: the same text, thoughts, calls and errors as a frame per event, from
    far fewer chunks — on a recorded provider stream split into reads of every size."""
    for transcript in ("thinking-text-tools.sse", "overloaded-mid-stream.sse"):
        adapter = AnthropicAdapter()
        events = adapter.feed((TRANSCRIPTS / transcript).read_bytes()) + adapter.close()
        each = SigilBridge(ByteVocabulary())
        expected = decode(b"".join(each.push(e) for e in events) + each.end())
        for size in (1, 2, 3, 7, len(events)):
            together = SigilBridge(ByteVocabulary())
            wire = b"".join(together.push_many(read) for read in _reads(events, [size] * (len(events) // size)))
            chunks = decode(wire + together.end())
            assert _decoded(chunks) == _decoded(expected), (transcript, size)
            assert isinstance(chunks[-1], StreamEnd)
        whole = SigilBridge(ByteVocabulary())
        pieces = [c for c in decode(whole.push_many(events) + whole.end()) if isinstance(c, Content)]
        fewer = len(pieces) < len([c for c in expected if isinstance(c, Content)])
        assert fewer or transcript == "overloaded-mid-stream.sse"  # that one has a single text event


def test_push_many_starts_a_new_frame_every_frame_tokens(monkeypatch: Any) -> None:
    """A long read is published in pieces of at most FRAME_TOKENS tokens, each its own chunk."""
    monkeypatch.setattr("groundstate.providers.bridge.FRAME_TOKENS", 5)
    bridge = SigilBridge(ByteVocabulary())
    events: list[Event] = [TextDelta("abc"), TextDelta("defgh"), ThinkDelta("ijklmnopq"), TextDelta("r")]
    chunks = decode(bridge.push_many(events) + bridge.end())
    contents = [c for c in chunks if isinstance(c, Content)]
    assert all(len(c.tokens) <= 5 for c in contents), [bytes(c.tokens) for c in contents]
    assert by_mode(chunks) == {Mode.TEXT: "abcdefghr", Mode.THINK: "ijklmnopq"}
    assert [bytes(c.tokens) for c in contents if c.mode == Mode.TEXT][:2] == [b"abcde", b"fgh"]


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_EVENT = st.one_of(
    st.builds(TextDelta, _TEXT),
    st.builds(ThinkDelta, _TEXT),
    st.builds(ToolCall, st.just(0), st.just("call_1"), st.just("f"), st.dictionaries(st.text(max_size=3), st.just(1))),
    st.builds(Finish, st.just("stop"), st.just("stop")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_EVENT, max_size=30), st.lists(st.integers(1, 6), max_size=10), st.integers(1, 9))
def test_push_many_equals_push_on_any_events_and_reads(events: list[Any], sizes: list[int], frame: int) -> None:
    """Whatever the events and however they are split into reads, and whatever the frame bound: the decoder reads
    the same text, thoughts and calls as from a frame per event."""
    each = SigilBridge(ByteVocabulary())
    expected = decode(b"".join(each.push(e) for e in events) + each.end())
    together = SigilBridge(ByteVocabulary())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("groundstate.providers.bridge.FRAME_TOKENS", frame)
        wire = b"".join(together.push_many(read) for read in _reads(events, sizes))
    assert _decoded(decode(wire + together.end())) == _decoded(expected)


_SSE_PIECE = st.one_of(
    st.sampled_from(
        [
            b"data: ",
            b"\n\n",
            b"\n",
            b"[DONE]",
            b'{"choices":[{"index":0,"delta":{"content":"',
            b'"}}]}',
            b'{"choices":[{"index":0,"delta":{"reasoning_content":"',
            b"event: error\n",
            b'{"error":{"message":"overloaded"}}',
            b'","finish_reason":"stop"}]}',
            b"\xff\xfe",
            b"\\u00",
        ]
    ),
    st.binary(max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SSE_PIECE, max_size=40), st.lists(st.integers(1, 40), max_size=8))
def test_the_gateways_framing_equals_a_frame_per_event_on_hostile_bodies(pieces: list[bytes], sizes: list[int]) -> None:
    """Whatever an upstream sends (broken SSE, stray bytes, errors mid-stream), read in pieces of any size: what
    subscribers decode from the gateway's framing (a read's events together) is what a frame per event gives."""
    body = b"".join(pieces)
    reads, at = [], 0
    for size in sizes:
        reads.append(body[at : at + size])
        at += size
    reads.append(body[at:])
    one, many = provider_api("openai-chat").adapter("openai"), provider_api("openai-chat").adapter("openai")
    each, together = SigilBridge(ByteVocabulary()), SigilBridge(ByteVocabulary())
    expected = b"".join(each.push(e) for read in reads for e in one.feed(read))
    expected += b"".join(each.push(e) for e in one.close()) + each.end()
    wire = b"".join(together.push_many(many.feed(read)) for read in reads) + together.push_many(many.close())
    assert _decoded(decode(wire + together.end())) == _decoded(decode(expected))


def test_an_error_record_past_a_frame_is_published_cut_and_the_stream_goes_on() -> None:
    """An upstream's 70 KB error message made an UPSTREAM_ERROR frame past the payload limit: the relay failed and
    subscribers lost the read. Now the record is cut to fit, and what came before and after it arrives."""
    from groundstate.providers import ErrorEvent, ErrorRecord

    record = ErrorRecord("server", "openai", None, None, "E" * 70_000, True, None, None, {"raw": "R" * 70_000})
    for push_many in (False, True):
        bridge = SigilBridge(ByteVocabulary())
        events: list[Event] = [TextDelta("before "), ErrorEvent(record), TextDelta("after")]
        wire = bridge.push_many(events) if push_many else b"".join(bridge.push(e) for e in events)
        chunks = decode(wire + bridge.end())
        [error] = [c.error for c in chunks if isinstance(c, UpstreamError)]
        assert error["plane"] == "server" and error["message"].startswith("E" * 2000)
        assert error["message"].endswith("(68000 characters cut)") and len(json.dumps(error)) < 16 * 1024
        assert by_mode(chunks)[Mode.TEXT] == "before after" and isinstance(chunks[-1], StreamEnd)


@pytest.mark.alone
def test_a_huge_text_event_is_framed_in_linear_time() -> None:
    """push_many cut a long event by copying the rest of it at every frame (quadratic: 8 MB took 47 s and held up
    the gateway's loop); later its frames were joined by adding bytes to bytes (32 MiB: 90 s). Sixteen times the
    event takes about sixteen times as long — by push, push_many and a hold."""
    import time

    for push in ("push", "push_many", "held"):
        timings = []
        for size in (1 << 20, 16 << 20):
            best = float("inf")
            for _ in range(2):
                bridge = SigilBridge(ByteVocabulary(), hold=60.0 if push == "held" else 0.0)
                event = TextDelta("x" * size)
                started = time.perf_counter()
                wire = bridge.push(event) if push != "push_many" else bridge.push_many([event])
                best = min(best, time.perf_counter() - started)
                assert len(wire) + len(bridge.release()) > size
            timings.append(best)
        assert timings[1] < 24 * timings[0] + 0.3, (push, timings)  # 16 times the size: quadratic took 45 times


def test_each_completion_has_a_stream_of_its_own_and_an_error_ends_them_all() -> None:
    """Text of several completions (``n`` > 1) was merged into one stream; push and push_many now frame each on its
    own stream (ids from ``next_stream``), and an upstream error reaches every one of them."""
    from groundstate.providers import ErrorEvent, ErrorRecord

    failed = ErrorEvent(ErrorRecord("server", "x", None, None, "m", True, None, None))
    events: list[Event] = [TextDelta("a1 ", 0), TextDelta("b1 ", 1), TextDelta("c1 ", 2), TextDelta("a2", 0),
                           TextDelta("b2", 1), failed]
    for many in (False, True):
        ids = iter([40, 41])
        bridge = SigilBridge(ByteVocabulary(), 7, next_stream=ids.__next__)
        wire = bridge.push_many(events) if many else b"".join(bridge.push(e) for e in events)
        chunks = decode(wire + bridge.end())
        texts: dict[int, bytes] = {}
        for chunk in chunks:
            if isinstance(chunk, Content):
                texts[chunk.stream] = texts.get(chunk.stream, b"") + bytes(chunk.tokens)
        assert texts == {7: b"a1 a2", 40: b"b1 b2", 41: b"c1 "}
        assert sorted(c.stream for c in chunks if isinstance(c, UpstreamError)) == [7, 40, 41]
        assert sorted(c.stream for c in chunks if isinstance(c, StreamEnd)) == [7, 40, 41]
        assert bridge.end() == b"" and bridge.push(TextDelta("late")) == b""  # a stream ends once


class _Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_hold_gathers_events_of_separate_pushes_into_one_frame_until_due() -> None:
    """With a hold, text pushed event by event waits in one frame until it is that old (then the push that finds it
    due flushes it: one chunk, where a frame per event gives three), and ``held_for`` says how long is left."""
    clock = _Clock()
    bridge = SigilBridge(ByteVocabulary(), hold=0.002, clock=clock)
    assert bridge.held_for() is None
    hello = bridge.push(TextDelta("a"))
    assert [c for c in decode(hello) if isinstance(c, Content)] == []
    assert bridge.held_for() == pytest.approx(0.002)
    clock.now += 0.001
    assert bridge.push(TextDelta("b")) == b"" and bridge.held_for() == pytest.approx(0.001)
    clock.now += 0.001
    due = bridge.push(TextDelta("c"))
    assert bridge.held_for() is None
    assert [bytes(c.tokens) for c in decode(hello + due) if isinstance(c, Content)] == [b"abc"]
    unheld = SigilBridge(ByteVocabulary())
    each = b"".join(unheld.push(TextDelta(t)) for t in "abc")
    assert [bytes(c.tokens) for c in decode(each) if isinstance(c, Content)] == [b"a", b"b", b"c"]


def test_release_publishes_what_is_held_and_anything_else_releases_it_first() -> None:
    """``release`` flushes the held frame now; a tool call, an error or the end flush it before themselves, so the
    order of what the decoder reads is the order of the events."""
    from groundstate.providers import ErrorEvent, ErrorRecord

    failed = ErrorEvent(ErrorRecord("server", "x", None, None, "m", True, None, None))
    for last in ("release", "call", "error", "end"):
        clock = _Clock()
        bridge = SigilBridge(ByteVocabulary(), hold=10.0, clock=clock)
        wire = bridge.push(TextDelta("held ")) + bridge.push_many([TextDelta("text")])
        assert [c for c in decode(wire) if isinstance(c, Content)] == []
        if last == "release":
            wire += bridge.release()
            assert bridge.held_for() is None and bridge.release() == b""
        elif last == "call":
            wire += bridge.push(ToolCall(0, "call_1", "f", {"x": 1}, None, ""))
        elif last == "error":
            wire += bridge.push(failed)
        chunks = decode(wire + bridge.end())
        assert by_mode(chunks)[Mode.TEXT] == "held text", last
        first = next(i for i, c in enumerate(chunks) if isinstance(c, Content))
        assert not any(isinstance(c, UpstreamError | StreamEnd) for c in chunks[:first]), last


def test_a_hold_covers_every_completions_stream() -> None:
    """``n`` > 1: each completion's stream holds its own frame; ``held_for`` is the soonest, ``release`` all."""
    clock = _Clock()
    bridge = SigilBridge(ByteVocabulary(), 7, hold=0.005, clock=clock, next_stream=iter([8]).__next__)
    wire = bridge.push(TextDelta("a", 0))
    clock.now += 0.003
    wire += bridge.push(TextDelta("b", 1))
    assert bridge.held_for() == pytest.approx(0.002)
    wire += bridge.release()
    texts = {c.stream: bytes(c.tokens) for c in decode(wire) if isinstance(c, Content)}
    assert texts == {7: b"a", 8: b"b"}


def test_a_hold_is_seconds_zero_or_more() -> None:
    from groundstate.providers import HoldRefused

    for hold in (-0.001, float("nan"), True, "0.5", None):
        with pytest.raises(HoldRefused, match="hold is seconds"):
            SigilBridge(ByteVocabulary(), hold=hold)  # type: ignore[arg-type]


def test_nothing_waits_longer_than_the_hold_when_the_clock_is_set_back() -> None:
    """A clock that reads earlier than when the frame began to hold (set back an hour) or no number: the frame is
    due at once, not an hour later."""
    for setback in (3600.0, float("nan")):
        clock = _Clock()
        bridge = SigilBridge(ByteVocabulary(), hold=0.002, clock=clock)
        wire = bridge.push(TextDelta("x"))
        clock.now = clock.now - setback if setback == setback else setback
        assert bridge.held_for() == 0.0
        wire += bridge.push(TextDelta("y"))  # due: flushed by the push that finds it so
        assert [bytes(c.tokens) for c in decode(wire) if isinstance(c, Content)] == [b"xy"], setback


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_EVENT, max_size=30),
    st.lists(st.integers(1, 6), max_size=10),
    st.lists(st.sampled_from([0.0, 0.0005, 0.001, 0.003]), min_size=1, max_size=30),
    st.integers(1, 9),
)
def test_holding_equals_push_on_any_events_reads_and_timing(
    events: list[Any], sizes: list[int], steps: list[float], frame: int
) -> None:
    """Whatever the events, their reads, the time between reads and the frame bound, and whether the owner releases
    between reads: a held stream decodes to what a frame per event gives."""
    each = SigilBridge(ByteVocabulary())
    expected = decode(b"".join(each.push(e) for e in events) + each.end())
    clock = _Clock()
    held = SigilBridge(ByteVocabulary(), hold=0.002, clock=clock)
    wire = b""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("groundstate.providers.bridge.FRAME_TOKENS", frame)
        for number, read in enumerate(_reads(events, sizes)):
            step = steps[number % len(steps)]
            clock.now += step
            wire += held.push_many(read) if number % 2 else b"".join(held.push(e) for e in read)
            if step == 0.003:
                wire += held.release()
    assert _decoded(decode(wire + held.end())) == _decoded(expected)


@pytest.mark.alone
def test_holding_on_many_completions_stays_linear() -> None:
    """An upstream may number its completions as it likes: held_for after every read looked at every stream the
    response had opened (20,000 of them: minutes). Four times the completions take about four times as long."""
    import time

    timings = []
    for count in (5_000, 20_000):
        bridge = SigilBridge(ByteVocabulary(), hold=0.002)
        started = time.perf_counter()
        for index in range(count):
            bridge.push_many([TextDelta("x", index)])
            bridge.held_for()
        timings.append(time.perf_counter() - started)
        texts = {c.stream for c in decode(bridge.release() + bridge.end()) if isinstance(c, Content)}
        assert len(texts) <= count
    assert timings[1] < 8 * timings[0] + 1.0, timings


def test_a_completion_that_holds_again_after_its_frame_left_is_released_too() -> None:
    """A further completion's frame released, then held again at the same reading of a coarse clock: the response
    still knows it holds, and its ``release`` sends it."""
    clock = _Clock()
    bridge = SigilBridge(ByteVocabulary(), 7, hold=0.001, clock=clock, next_stream=iter([8]).__next__)
    wire = bridge.push(TextDelta("a", 1)) + bridge.release()
    assert bridge.held_for() is None
    wire += bridge.push(TextDelta("c", 1))  # held again, at the same reading
    assert bridge.held_for() == pytest.approx(0.001)
    wire += bridge.release()
    assert [bytes(c.tokens) for c in decode(wire) if isinstance(c, Content)] == [b"a", b"c"]
