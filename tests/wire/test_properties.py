"""The seed's properties of SIGIL, over generated token streams and byte strings.

roundtrip (decode . encode = the model's chunks); incremental = batch for every split; random bytes never
raise; after a reset, what follows decodes exactly as it would after any other history (no leakage).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from groundstate.wire import Content, Decoder, Encoder, Mode, Reason, Reset, StreamEnd, UpstreamError
from groundstate.wire.constants import Kind, Op
from groundstate.wire.encoder import encode_tokens
from groundstate.wire.frames import FrameScanner, encode_frame
from groundstate.wire.hello import encode_hello
from groundstate.wire.varint import encode_varint

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
    return transport_prefix(stream, 0, frames)


def transport_prefix(stream: int, first: int, end: int) -> bytes:
    """Empty frames with seqs ``first`` to ``end - 1``: they move the stream's next seq on and emit nothing."""
    return b"".join(encode_frame(Kind.DATA, stream, seq, bytes((Mode.TEXT, Op.FLUSH))) for seq in range(first, end))


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


AGREED = 5  # the stream of the ground-state property below
HOSTILE_FRAMES = ("other_hello", "bad_hello", "opcode", "nested", "unmatched", "upstream", "bad_upstream",
                     "unknown_kind", "version", "empty", "entry")  # fmt: skip


def hostile_frame(trigger: str, seq: int, mode: Mode, reason: str) -> bytes:
    """A CRC-valid frame of stream AGREED that ends in a reset whatever the stream's state before it."""
    if trigger == "other_hello":  # a table no generated stream agrees on (theirs hold ids below 300)
        return encode_frame(Kind.HELLO, AGREED, seq, encode_hello("other", range(1000, 1127)))
    if trigger == "bad_hello":
        return encode_frame(Kind.HELLO, AGREED, seq, encode_varint(1) + b"v" + bytes(range(126)))
    if trigger == "opcode":
        return encode_frame(Kind.DATA, AGREED, seq, bytes((mode, 0x41)) + TRIGGERS[reason])
    if trigger == "nested":
        return encode_frame(Kind.DATA, AGREED, seq, bytes((Mode.TEXT, 0x41, Op.THINK_START, 0x42, Op.THINK_START)))
    if trigger == "unmatched":
        return encode_frame(Kind.DATA, AGREED, seq, bytes((Mode.TEXT, 0x41, Op.TOOL_CALL_END)))
    if trigger == "upstream":
        return encode_frame(Kind.UPSTREAM_ERROR, AGREED, seq, b'{"plane": "rate"}')
    if trigger == "bad_upstream":
        return encode_frame(Kind.UPSTREAM_ERROR, AGREED, seq, b"[1]")
    if trigger == "unknown_kind":
        return encode_frame(0x09, AGREED, seq, b"x")
    if trigger == "version":
        return encode_frame(Kind.DATA, AGREED, seq, bytes((mode, 0x41)), version=2)
    if trigger == "empty":
        return encode_frame(Kind.DATA, AGREED, seq, b"")
    return encode_frame(Kind.DATA, AGREED, seq, bytes((7, 0x41)))  # an entry mode above 3


steps = st.lists(
    st.one_of(
        st.tuples(st.just("events"), events.map(lambda evs: [e for e in evs if e[0] != "end"])),
        st.tuples(st.just("reset"), st.sampled_from(HOSTILE_FRAMES), st.sampled_from(sorted(TRIGGERS))),
        st.tuples(st.just("gap"), st.integers(1, 3)),  # frames lost in transit: the next one reveals a SequenceGap
        st.tuples(st.just("mismatch"), st.lists(token_ids, max_size=4)),
    ),
    max_size=12,
)


@SETTINGS
@given(steps, hot_tables, st.integers(16, 80), st.booleans(), st.lists(st.integers(0, 10_000), max_size=4))
def test_after_any_reset_decoding_continues_as_a_fresh_decoder_would(
    plan: list[tuple[Any, ...]], hot: list[int] | None, size: int, compiled: bool, cuts: list[int]
) -> None:
    """Issue 31 (SIGIL, theorems 2-4 of the seed): a reset chunk means the ground state. Whatever the stream went
    through — modes, buffered tokens, gaps, refused HELLOs, upstream errors —, once a frame has ended in a reset, the
    rest of the input decodes exactly as it does on a fresh decoder that knows only the stream's transport: the HELLO
    it agreed on and the next seq (reached here by empty frames). Nothing of the mode or the buffer leaks forward."""
    encoder = Encoder(AGREED, hot_table=hot, max_payload=size)
    pieces: list[tuple[bytes, int | None]] = [(bytes(encoder.hello()), None)]  # (bytes, seq of a reset frame)
    for step in plan:
        if step[0] == "events":
            pieces.append((bytes(play(encoder, step[1]) + encoder.cut()), None))
        elif step[0] == "gap":
            pieces.append((bytes(encoder.cut()), None))
            encoder.seq += step[1]
        elif step[0] == "mismatch":  # a frame that says it enters a mode the encoder is not in
            pieces.append((bytes(encoder.cut()), None))
            payload = bytes(((encoder.mode + 1) % len(Mode),)) + encode_tokens(step[1], {})
            pieces.append((encode_frame(Kind.DATA, AGREED, encoder.seq, payload), None))
            encoder.seq += 1
        else:
            pieces.append((bytes(encoder.cut()), None))
            pieces.append((hostile_frame(step[1], encoder.seq, encoder.mode, step[2]), encoder.seq))
            encoder.seq += 1
    pieces.append((bytes(encoder.cut() + encoder.end()), None))
    live = Decoder(compiled=compiled)
    for number, (piece, reset_seq) in enumerate(pieces):
        emitted = live.feed(piece)
        if reset_seq is None:
            continue
        assert emitted and isinstance(emitted[-1], Reset) and emitted[-1].stream == AGREED  # it ended in a reset
        rest = b"".join(p for p, _ in pieces[number + 1 :])
        fresh = Decoder(compiled=compiled)  # the agreed HELLO (seq 0), then empty frames up to the reset frame's seq
        fresh.feed(bytes(Encoder(AGREED, hot_table=hot).hello()) + transport_prefix(AGREED, 1, reset_seq + 1))
        twin = Decoder(compiled=compiled)  # the live decoder's history, then the rest
        twin.feed(b"".join(p for p, _ in pieces[: number + 1]))
        expected = fresh.feed(rest) + fresh.close()
        assert [c for piece in split_at(rest, cuts) for c in twin.feed(piece)] + twin.close() == expected


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


def tables_with_a_plain_start() -> st.SearchStrategy[list[int]]:
    """Hot tables (127 distinct ids) whose first ``k`` entries are their own index, then any order of the rest."""
    return st.tuples(st.integers(min_value=0, max_value=127), st.permutations(list(range(127, 300)))).map(
        lambda pair: list(range(pair[0])) + pair[1][: 127 - pair[0]])


@given(st.lists(st.integers(min_value=0, max_value=300), max_size=40), st.one_of(
    st.none(), tables_with_a_plain_start(), st.permutations(list(range(200))).map(lambda p: p[:127])))
def test_a_run_of_plain_tokens_is_encoded_as_token_by_token(ids: list[int], hot: list[int] | None) -> None:
    """The whole-run shortcut (tokens that are their own hot form, taken as bytes at once) gives exactly what the
    token-by-token encoding gives, for any table — the default, one whose first entries are their own index, or
    any other — and any tokens."""
    table = tuple(hot) if hot is not None else tuple(range(127))
    encoder = Encoder(1, hot_table=table)
    index = {token: i for i, token in enumerate(table)}
    one_by_one = b"".join(encode_tokens((token,), index) for token in ids)
    assert encode_tokens(ids, index, encoder._plain_below) == one_by_one
    assert encode_tokens(bytes(i for i in ids if i < 256), index, encoder._plain_below) == b"".join(
        encode_tokens((token,), index) for token in ids if token < 256)
