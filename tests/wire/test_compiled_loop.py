"""The decoder's compiled frame loop (wire/_frameloop.c) changes nothing but the time: for any input — valid
streams with any hot table, streams interleaved, damaged bytes, random bytes — and any split of it, the decoder
with the loop emits exactly the chunks (resets and their details included) of the decoder without it; and the loop
really takes the common frames (the Python decoder sees only the others)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundstate.wire import Decoder, Encoder, Mode
from groundstate.wire.constants import Kind
from groundstate.wire.frames import Frame, Junk, encode_frame

from ..pieces import split_at
from .test_properties import SETTINGS, encode, events, hot_tables, play


def decoded(data: bytes, cuts: list[int], compiled: bool, max_payload: int = 64 * 1024) -> list[Any]:
    decoder = Decoder(max_payload=max_payload, compiled=compiled)
    out: list[Any] = [c for piece in split_at(data, cuts) for c in decoder.feed(piece)]
    return out + decoder.close()


def same_with_and_without(data: bytes, cuts: list[int], max_payload: int = 64 * 1024) -> None:
    assert decoded(data, cuts, True, max_payload) == decoded(data, [], False, max_payload)


@SETTINGS
@given(events, hot_tables, st.integers(16, 200), st.lists(st.integers(0, 10_000), max_size=8), st.booleans())
def test_valid_streams(
    evs: list[tuple[Any, ...]], hot: list[int] | None, size: int, cuts: list[int], small_limit: bool
) -> None:
    """(With a small limit, the decoder refuses the larger frames: the loop must too.)"""
    same_with_and_without(encode(5, evs, hot, size), cuts, size // 2 + 8 if small_limit else 64 * 1024)


@SETTINGS
@given(events, events, st.lists(st.booleans(), max_size=60), st.lists(st.integers(0, 10_000), max_size=6))
def test_interleaved_streams(
    first: list[tuple[Any, ...]], second: list[tuple[Any, ...]], turns: list[bool], cuts: list[int]
) -> None:
    encoders = (Encoder(1, max_payload=30), Encoder(2, max_payload=30))
    pieces = [[bytes(e.hello())] for e in encoders]
    for encoder, evs, out in zip(encoders, (first, second), pieces, strict=True):
        out += [bytes(play(encoder, [event])) for event in evs]
    data, left = bytearray(), [list(p) for p in pieces]
    for turn in [*turns, *[True] * 60, *[False] * 60]:
        if left[turn]:
            data += left[turn].pop(0)
    same_with_and_without(bytes(data), cuts)


@SETTINGS
@given(events, st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=3),
       st.lists(st.integers(0, 10_000), max_size=6))  # fmt: skip
def test_damaged_streams(evs: list[tuple[Any, ...]], damage: list[tuple[int, int]], cuts: list[int]) -> None:
    data = bytearray(encode(1, evs, None, 40))
    for where, value in damage:
        data[where % len(data)] = value
    same_with_and_without(bytes(data), cuts)


@SETTINGS
@given(st.binary(max_size=3000), st.lists(st.integers(0, 3000), max_size=8))
def test_random_bytes(data: bytes, cuts: list[int]) -> None:
    same_with_and_without(data, cuts)


tokens = st.integers(0, 0x7E)
clean_bytes = st.one_of(tokens, tokens, tokens, tokens, st.sampled_from(range(0xC0, 0xC8)))
any_bytes = st.one_of(clean_bytes, st.sampled_from([0x7F, 0x80, 0xBF, *range(0xC8, 0xD0), 0xD0, 0xF0, 0xFF]))
payloads = st.one_of(
    st.lists(clean_bytes, max_size=12),  # tokens and the opcodes the loop takes, nested well or not
    st.lists(clean_bytes, max_size=12),
    st.lists(any_bytes, max_size=12),
    st.lists(tokens, min_size=141, max_size=160),  # longer than the smaller limit below
).map(bytes)
FOLLOW = -1  # the entry byte is the mode the stream is in (else a mode mismatch)
forged_frames = st.lists(
    st.tuples(
        st.sampled_from([1] * 6 + [2]),  # the stream
        st.sampled_from([0] * 10 + [1, -1, -5]),  # how far the seq is from the next one (a gap, a repeat)
        st.sampled_from([Kind.DATA] * 15 + [Kind.HELLO, Kind.UPSTREAM_ERROR, 0x09]),
        st.sampled_from([FOLLOW] * 6 + [0, 1, 2, 3, 4]),  # the entry mode byte (4 is none)
        payloads,
    ),
    max_size=40,
)
STARTS, ENDS = {0xC1: 2, 0xC3: 1, 0xC5: 3}, {0xC2: 2, 0xC4: 1, 0xC6: 3}


def mode_after(mode: int, body: bytes) -> int:
    """The stream's mode after a payload (ground, 0, after anything the decoder resets on)."""
    for byte in body:
        if byte in STARTS:
            if mode:
                return 0
            mode = STARTS[byte]
        elif byte in ENDS:
            if ENDS[byte] != mode:
                return 0
            mode = 0
        elif byte >= 0xC8 or byte == 0x7F:
            return 0
    return mode


@settings(
    SETTINGS, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
)  # long payloads on purpose
@given(forged_frames, st.sampled_from([140, 64 * 1024]), st.lists(st.integers(0, 3000), max_size=6))
def test_frames_with_any_payload_and_a_valid_checksum(
    frames: list[tuple[int, int, int, int, bytes]], max_payload: int, cuts: list[int]
) -> None:
    """What only a sender could forge (the checksum is right): any bytes in a payload, gaps, repeats, other kinds."""
    data = bytearray(Encoder(1).hello() + Encoder(2).hello())
    following, modes = {1: 1, 2: 1}, {1: 0, 2: 0}
    for stream, off, kind, entry, body in frames:
        seq = max(following[stream] + off, 0)
        following[stream] = seq + 1
        entry = modes[stream] if entry == FOLLOW else entry
        modes[stream] = mode_after(entry, body) if entry < 4 and kind == Kind.DATA else 0
        data += encode_frame(kind, stream, seq, bytes((entry,)) + body)
    same_with_and_without(bytes(data), cuts, max_payload)


class Counting(Decoder):
    """A decoder that counts the frames its Python part handles."""

    handled = 0

    def _handle(self, item: Frame | Junk, out: list[Any]) -> None:
        self.handled += 1
        super()._handle(item, out)


def test_the_loop_takes_the_common_frames_and_leaves_the_rest() -> None:
    encoder = Encoder(7, hot_table=list(range(1000, 1127)))
    data = bytes(encoder.hello())
    for i in range(200):
        mode = (Mode.TEXT, Mode.THINK, Mode.TOOL_CALL)[i % 3]
        data += bytes(encoder.content(mode, [i % 127, 5000 + i, 2**20 + i]) + encoder.chunk_end())
    data += bytes(encoder.end())
    decoder = Counting()
    chunks = decoder.feed(data) + decoder.close()
    assert decoder.handled == 2  # the HELLO and the frame with STREAM_END: every other frame was the loop's
    assert chunks == decoded(data, [], compiled=False)
    python_only = Counting(compiled=False)
    python_only.feed(data)
    assert python_only.handled == 202
