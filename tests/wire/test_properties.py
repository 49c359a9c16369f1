"""The seed's properties of SIGIL, over generated token streams and byte strings.

roundtrip (decode . encode = the model's chunks); incremental = batch for every split; random bytes never
raise; after a reset, what follows decodes exactly as it would after any other history (no leakage).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from groundstate.wire import Content, Decoder, Encoder, Mode, Reset, StreamEnd, UpstreamError
from groundstate.wire.constants import Kind, Op, Reason
from groundstate.wire.frames import FrameScanner, encode_frame

from ..pieces import split_at

token_ids = st.one_of(st.integers(0, 126), st.integers(0, 16383), st.integers(0, 2**32 - 1))
modes = st.sampled_from(list(Mode))
events = st.lists(
    st.one_of(
        st.tuples(st.just("content"), modes, st.lists(token_ids, max_size=8)),
        st.tuples(st.just("chunk_end")),
        st.tuples(st.just("flush")),
        st.tuples(st.just("end")),
        st.tuples(
            st.just("upstream_error"), st.dictionaries(st.sampled_from(["plane", "status"]), st.integers(0, 600))
        ),
    ),
    max_size=25,
)
hot_tables = st.one_of(st.none(), st.permutations(list(range(300))).map(lambda p: p[:127]))


def play(encoder: Encoder, evs: list[tuple[Any, ...]]) -> bytearray:
    out = bytearray()
    for event in evs:
        if event[0] == "content":
            out += encoder.content(event[1], event[2])
        elif event[0] == "upstream_error":
            out += encoder.upstream_error(event[1])
        else:
            out += getattr(encoder, event[0])()
    return out


def encode(stream: int, evs: list[tuple[Any, ...]], hot: list[int] | None, max_payload: int) -> bytes:
    """A HELLO, the events, and a final STREAM_END (a stream may end and restart from seq 0 in between)."""
    encoder = Encoder(stream, hot_table=hot, max_payload=max_payload)
    return bytes(encoder.hello() + play(encoder, evs) + encoder.end())


def model(stream: int, evs: list[tuple[Any, ...]]) -> list[Any]:
    """What the decoder must emit, derived from the events alone."""
    out: list[Any] = []
    mode, buffer = Mode.TEXT, list[Any]()

    def emit(boundary: bool) -> None:
        nonlocal buffer
        if buffer:
            out.append(Content(stream, mode, tuple(buffer), boundary))
            buffer = []

    for event in evs:
        kind = event[0]
        if kind == "content":
            if event[1] != mode:
                if mode != Mode.TEXT:
                    emit(True)
                    mode = Mode.TEXT
                if event[1] != Mode.TEXT:
                    emit(True)
                    mode = event[1]
            buffer.extend(event[2])
        elif kind in ("chunk_end", "flush"):
            emit(kind == "chunk_end")
        elif kind == "end":
            emit(True)
            mode = Mode.TEXT
            emit(True)
            out.append(StreamEnd(stream))
        else:
            out.append(UpstreamError(stream, event[1]))
            out.append(Reset(stream, Reason.UPSTREAM_ERROR, dropped=len(buffer)))
            mode, buffer = Mode.TEXT, []
    return out


def decode(data: bytes, cuts: list[int] = ()) -> list[Any]:  # type: ignore[assignment]
    decoder = Decoder()
    out: list[Any] = [c for piece in split_at(data, cuts) for c in decoder.feed(piece)]
    return out + decoder.close()


def comparable(chunks: list[Any]) -> list[Any]:
    """Chunks without HELLO records and without the reset details (free text)."""
    out = []
    for c in chunks:
        if isinstance(c, Reset):
            out.append(Reset(c.stream, c.reason, c.dropped, c.skipped_bytes))
        elif type(c).__name__ != "Hello":
            out.append(c)
    return out


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.integers(0, 2**32 - 1), events, hot_tables, st.integers(16, 200))
def test_roundtrip(stream: int, evs: list[tuple[Any, ...]], hot: list[int] | None, max_payload: int) -> None:
    data = encode(stream, evs, hot, max_payload)
    assert comparable(decode(data)) == model(stream, [*evs, ("end",)])


@SETTINGS
@given(events, hot_tables, st.integers(16, 120), st.lists(st.integers(0, 10_000), max_size=12))
def test_incremental_equals_batch(
    evs: list[tuple[Any, ...]], hot: list[int] | None, size: int, cuts: list[int]
) -> None:
    data = encode(3, evs, hot, size)
    assert decode(data, cuts) == decode(data)


@SETTINGS
@given(st.binary(max_size=3000), st.lists(st.integers(0, 3000), max_size=8))
def test_random_bytes_never_raise_and_split_does_not_matter(data: bytes, cuts: list[int]) -> None:
    assert decode(data, cuts) == decode(data)


@SETTINGS
@given(events, st.integers(0, 10_000), st.integers(0, 255), st.lists(st.integers(0, 10_000), max_size=6))
def test_a_damaged_byte_is_reported_and_splits_do_not_matter(
    evs: list[tuple[Any, ...]], where: int, value: int, cuts: list[int]
) -> None:
    data = bytearray(encode(1, evs, None, 40))
    where %= len(data)
    data[where] = value
    batch = decode(bytes(data))
    assert decode(bytes(data), cuts) == batch
    if value != encode(1, evs, None, 40)[where]:
        assert any(isinstance(c, Reset) for c in batch)


def neutral_prefix(stream: int, frames: int) -> bytes:
    """Frames that leave the stream in its ground state with ``frames`` seqs consumed, emitting nothing."""
    return b"".join(encode_frame(Kind.DATA, stream, seq, bytes((Mode.TEXT, Op.FLUSH))) for seq in range(frames))


TRIGGERS = {
    Reason.RESERVED_OPCODE: bytes((0xC9,)),
    Reason.INVALID_BYTE: bytes((0xD5,)),
    Reason.VARINT_OVERFLOW: bytes((0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F)),
    Reason.TRUNCATED_TOKEN: bytes((0x85,)),
}


@SETTINGS
@given(events, st.sampled_from(sorted(TRIGGERS)), events, st.integers(16, 80))
def test_no_leakage_after_a_reset(
    prefix_events: list[tuple[Any, ...]], reason: str, rest_events: list[tuple[Any, ...]], size: int
) -> None:
    encoder = Encoder(5, max_payload=size)
    prefix = play(encoder, [e for e in prefix_events if e[0] != "end"])
    prefix += encoder.cut()  # the prefix ends on a frame boundary
    frames = encoder.seq
    trigger = encode_frame(Kind.DATA, 5, frames, bytes((encoder.mode,)) + bytes((0x41,)) + TRIGGERS[reason])
    rest = Encoder(5, max_payload=size)
    rest.seq = frames + 1
    tail = play(rest, [e for e in rest_events if e[0] != "end"]) + rest.end()
    results = []
    for history in (bytes(prefix), neutral_prefix(5, frames)):
        decoder = Decoder()
        decoder.feed(history)
        at_trigger = decoder.feed(trigger)
        assert isinstance(at_trigger[-1], Reset) and at_trigger[-1].reason == reason
        results.append(decoder.feed(bytes(tail)) + decoder.close())
    assert results[0] == results[1]


class DecoderMachine(RuleBasedStateMachine):
    """Random operations on a live decoder; the bytes fed so far, decoded in one piece, must agree."""

    def __init__(self) -> None:
        super().__init__()
        self.restart()

    @precondition(lambda self: self.closed)
    @rule()
    def restart(self) -> None:
        self.decoder = Decoder()
        self.fed = bytearray()
        self.out: list[Any] = []
        self.encoders = {1: Encoder(1, max_payload=32), 2: Encoder(2, max_payload=32)}
        self.pending = bytearray()
        self.closed = False

    def _feed(self, data: bytes, cut: int) -> None:
        cut = cut % (len(data) + 1)
        for piece in (data[:cut], data[cut:]):
            self.fed += piece
            self.out += self.decoder.feed(piece)

    @precondition(lambda self: not self.closed)
    @rule(stream=st.sampled_from([1, 2]), mode=modes, ids=st.lists(token_ids, max_size=6), cut=st.integers(0, 99))
    def content(self, stream: int, mode: Mode, ids: list[int], cut: int) -> None:
        self._feed(self.encoders[stream].content(mode, ids) + self.encoders[stream].flush(), cut)

    @precondition(lambda self: not self.closed)
    @rule(stream=st.sampled_from([1, 2]), cut=st.integers(0, 99))
    def end(self, stream: int, cut: int) -> None:
        self._feed(self.encoders[stream].end(), cut)

    @precondition(lambda self: not self.closed)
    @rule(data=st.binary(max_size=40), cut=st.integers(0, 99))
    def garbage(self, data: bytes, cut: int) -> None:
        self._feed(data, cut)

    @precondition(lambda self: not self.closed)
    @rule(stream=st.sampled_from([1, 2]), ids=st.lists(token_ids, min_size=1, max_size=6), flip=st.integers(0, 999))
    def corrupted_frame(self, stream: int, ids: list[int], flip: int) -> None:
        frame = bytearray(self.encoders[stream].text(ids) + self.encoders[stream].chunk_end())
        frame[flip % len(frame)] ^= 0x01
        self._feed(bytes(frame), 0)

    @precondition(lambda self: not self.closed)
    @rule()
    def close(self) -> None:
        self.out += self.decoder.close()
        self.closed = True

    @invariant()
    def batch_agrees(self) -> None:
        if self.closed:
            assert self.out == decode(bytes(self.fed))

    @invariant()
    def every_chunk_is_well_formed(self) -> None:
        reasons = {v for k, v in vars(Reason).items() if not k.startswith("_")}
        for chunk in self.out:
            if isinstance(chunk, Reset):
                assert chunk.reason in reasons and chunk.dropped >= 0 and chunk.skipped_bytes >= 0
                assert (chunk.stream is None) == (chunk.skipped_bytes > 0)
            elif isinstance(chunk, Content):
                assert chunk.tokens and all(0 <= t < 2**32 for t in chunk.tokens)
                assert chunk.stream in (1, 2)


TestDecoderMachine = DecoderMachine.TestCase
TestDecoderMachine.settings = settings(max_examples=120, stateful_step_count=25, deadline=None)


class CountingScanner(FrameScanner):
    """Counts frame-parse attempts: the work the scanner does beyond one pass over the bytes."""

    attempts = 0

    def _parse(self, buf: bytearray, p: int, n: int) -> object:  # type: ignore[override]
        CountingScanner.attempts += 1
        return super()._parse(buf, p, n)


FALSE_START = b"\xf0\x01\x02\x01\x00\xff\xff\x03"  # declares a 65,535-byte payload that never comes


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 300), st.binary(max_size=50), st.sampled_from([1, 7, 4096]))
def test_work_is_linear_in_the_input(repeats: int, filler: bytes, piece: int) -> None:
    data = (FALSE_START + filler) * repeats + encode(1, [("content", Mode.TEXT, [1, 2, 3])], None, 64)
    starts = data.count(0xF0)
    CountingScanner.attempts = 0
    scanner = CountingScanner()
    feeds = 0
    frames: list[Any] = []
    for i in range(0, len(data), piece):
        frames += scanner.feed(data[i : i + piece])
        feeds += 1
    frames += scanner.close()
    # each candidate is parsed once, plus one retry per feed while it waits for more bytes, plus once at close
    assert CountingScanner.attempts <= 2 * starts + feeds + 1
    assert sum(getattr(f, "skipped", 0) + getattr(f, "size", 0) for f in frames) == len(data)
