"""The SIGIL decoder under hostile input: bounded state, nested JSON, a bad HELLO that resets to the ground state."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

from groundstate.wire import Content, Decoder, Mode, Reason, Reset
from groundstate.wire.constants import Kind, Op
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


def test_a_different_hello_mid_stream_resets_the_stream_to_its_ground_state() -> None:
    first, other = hello(1, 0, "v", list(range(1, 128))), hello(1, 2, "w", list(range(2, 129)))
    data = first + encode_frame(Kind.DATA, 1, 1, b"\x00\x05") + other + encode_frame(Kind.DATA, 1, 3, b"\x00\x06\xcf")
    decoder = Decoder()
    chunks = decoder.feed(data) + decoder.close()
    resets = [(c.reason, c.dropped) for c in chunks if isinstance(c, Reset)]
    tokens = [t for c in chunks if isinstance(c, Content) for t in c.tokens]
    assert resets == [(Reason.BAD_HELLO, 1)]  # the token buffered before the bad HELLO is the ambiguous region
    assert tokens == [7]  # the first table's entry 6: the stream keeps the table it agreed on


def test_mid_stream_bad_hello_inside_a_thought_leaves_no_mode_or_buffer_behind(tmp_path: Path) -> None:
    """Issue 31 (SIGIL): a different HELLO in the middle of a thought reported a reset but kept the thought's mode and
    its buffered tokens, so the next frame reset again (ModeMismatch) and the report of what was dropped came one
    frame late. Now the BadHello reset is the ground state: one reset, with the buffered thought dropped and counted,
    and the next frame, entering text, decodes as text. Through ``groundstate wire decode``, as a user reads a
    recording."""
    table = list(range(1, 128))
    recording = (
        hello(1, 0, "v", table)
        + encode_frame(Kind.DATA, 1, 1, bytes((Mode.TEXT, Op.THINK_START, 0x05, 0x06)))  # a thought, no boundary yet
        + hello(1, 2, "w", list(range(2, 129)))  # a different table, mid-stream
        + encode_frame(Kind.DATA, 1, 3, bytes((Mode.TEXT, 0x07, Op.CHUNK_END, Op.STREAM_END)))
    )
    path = tmp_path / "bad-hello.sigil"
    path.write_bytes(recording)
    done = subprocess.run([sys.executable, "-m", "groundstate", "wire", "decode", str(path), "--jsonl"],
                          capture_output=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1 and b"Traceback" not in done.stderr  # 1: the recording holds a reset
    records = [json.loads(line) for line in done.stdout.decode().splitlines()]
    resets = [(r["reason"], r["dropped"]) for r in records if r["kind"] == "reset"]
    assert resets == [("BadHello", 2)]  # one reset, not a second ModeMismatch for the same damage
    assert [(r["kind"], r["tokens"]) for r in records if "tokens" in r] == [("text", [8])]
    assert records[-1] == {"stream": 1, "kind": "stream_end"}
