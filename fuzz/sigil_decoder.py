"""atheris fuzz harness for the SIGIL decoder, the frame scanner and the HELLO parser.

    python fuzz/sigil_decoder.py fuzz/corpus -atheris_runs=1000000

Each input is decoded whole and in pieces (the first byte picks the piece size), and whole by the decoder without
its compiled frame loop; the harness fails on any exception, on a difference between the three, and on any chunk
that breaks the inspection format.
"""

from __future__ import annotations

import contextlib
import json
import sys

import atheris

with atheris.instrument_imports():
    from groundstate.wire import Decoder
    from groundstate.wire.frames import FrameScanner
    from groundstate.wire.hello import HelloError, decode_hello


def decode(data: bytes, step: int, max_payload: int, compiled: bool = True) -> list[object]:
    decoder = Decoder(max_payload=max_payload, compiled=compiled)
    out: list[object] = []
    for i in range(0, len(data), step):
        out += decoder.feed(data[i : i + step])
    return out + decoder.close()


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    step, max_payload, body = data[0] % 23 + 1, 16 + data[1] * 4, data[2:]
    pieces = decode(body, step, max_payload)
    whole = decode(body, max(len(body), 1), max_payload)
    if pieces != whole:
        raise AssertionError("incremental decoding differs from batch decoding")
    if decode(body, max(len(body), 1), max_payload, compiled=False) != whole:
        raise AssertionError("the compiled frame loop decodes differently from the Python decoder alone")
    for chunk in whole:
        json.dumps(chunk.to_json())  # type: ignore[attr-defined]
    scanner = FrameScanner(max_payload)
    consumed = sum(
        getattr(item, "size", 0) or getattr(item, "skipped", 0) for item in scanner.feed(body) + scanner.close()
    )
    if consumed != len(body):
        raise AssertionError(f"frame scanner accounted for {consumed} of {len(body)} bytes")
    with contextlib.suppress(HelloError):
        decode_hello(body)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
