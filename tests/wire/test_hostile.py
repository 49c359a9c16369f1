"""The SIGIL decoder under hostile input: bounded state, nested JSON, a bad HELLO that costs only itself."""

from __future__ import annotations

import tracemalloc

from groundstate.wire import Content, Decoder, Reset
from groundstate.wire.constants import Kind, Reason
from groundstate.wire.frames import encode_frame

from .make_vectors import hello


def test_a_flood_of_tiny_streams_keeps_bounded_state() -> None:
    decoder = Decoder(max_streams=64)
    tracemalloc.start()
    for stream in range(1, 20_001):  # each opens and never ends: the worst case for a decoder's memory
        decoder.feed(encode_frame(Kind.DATA, stream, 0, b"\x00a"))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(decoder._streams) <= 64
    assert peak < 5_000_000  # 20,000 kept streams would need far more


def test_over_the_bound_new_streams_are_refused_with_a_reason_and_ended_ones_are_forgotten() -> None:
    decoder = Decoder(max_streams=2)
    encoder_frames = [encode_frame(Kind.DATA, s, 0, b"\x00a") for s in (1, 2)]
    decoder.feed(b"".join(encoder_frames))
    refused = decoder.feed(encode_frame(Kind.DATA, 3, 0, b"\x00b"))
    assert [(c.stream, c.reason) for c in refused if isinstance(c, Reset)] == [(3, Reason.TOO_MANY_STREAMS)]
    assert len(refused) == 1
    decoder.feed(encode_frame(Kind.DATA, 1, 1, b"\x00\xcf"))  # STREAM_END: stream 1 has ended
    accepted = decoder.feed(encode_frame(Kind.DATA, 4, 0, b"\x00c"))
    assert not any(getattr(c, "reason", None) == Reason.TOO_MANY_STREAMS for c in accepted)


def test_deeply_nested_upstream_error_payload_is_a_reset_not_a_recursion_error() -> None:
    payload = ("[" * 100_000 + "]" * 100_000).encode()
    chunks = Decoder().feed(encode_frame(Kind.UPSTREAM_ERROR, 1, 0, payload[:60_000]))
    assert [c.reason for c in chunks if isinstance(c, Reset)] == [Reason.BAD_UPSTREAM_ERROR]


def test_a_different_hello_mid_stream_costs_only_its_own_frame() -> None:
    first, other = hello(1, 0, "v", list(range(1, 128))), hello(1, 2, "w", list(range(2, 129)))
    data = first + encode_frame(Kind.DATA, 1, 1, b"\x00\x05") + other + encode_frame(Kind.DATA, 1, 3, b"\x00\x06\xcf")
    decoder = Decoder()
    chunks = decoder.feed(data) + decoder.close()
    resets = [c.reason for c in chunks if isinstance(c, Reset)]
    tokens = [t for c in chunks if isinstance(c, Content) for t in c.tokens]
    assert resets == [Reason.BAD_HELLO]
    assert tokens == [6, 7]  # the first table's entries 5 and 6: the frames on both sides of the bad HELLO decode
