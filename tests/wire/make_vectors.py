"""Write docs/sigil-vectors.json: SIGIL v1 test vectors with hand-derived expected chunks.

    python tests/wire/make_vectors.py

Frames are built here by a few independent lines (only the CRC-32C comes from the crc32c library), not
by groundstate.wire; the expected chunks are written by hand from docs/sigil.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crc32c import crc32c

DOCS = Path(__file__).parents[2] / "docs"
OUT = DOCS / "sigil-vectors.json"
SPEC = DOCS / "sigil.md"
BEGIN, END = "<!-- vectors:begin -->", "<!-- vectors:end -->"


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def frame(kind: int, stream: int, seq: int, payload: bytes, version: int = 1) -> bytes:
    body = bytes([version, kind]) + varint(stream) + varint(seq) + varint(len(payload)) + payload
    return b"\xf0" + body + crc32c(body).to_bytes(4, "little")


def data(stream: int, seq: int, *payload: int) -> bytes:
    return frame(0x02, stream, seq, bytes(payload))


def hello(stream: int, seq: int, vocabulary: str, table: list[int]) -> bytes:
    name = vocabulary.encode()
    return frame(0x01, stream, seq, varint(len(name)) + name + b"".join(varint(t) for t in table))


def text(stream: int, tokens: list[int], boundary: bool = True, kind: str = "text") -> dict[str, Any]:
    return {"stream": stream, "kind": kind, "tokens": tokens, "boundary": boundary}


def end(stream: int) -> dict[str, Any]:
    return {"stream": stream, "kind": "stream_end"}


def reset(stream: int | None, reason: str, dropped: int = 0, skipped: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"stream": stream, "kind": "reset", "reason": reason, "dropped": dropped}
    if skipped:
        out["skipped_bytes"] = skipped
    return out


def hello_chunk(stream: int, vocabulary: str, table: list[int]) -> dict[str, Any]:
    return {"stream": stream, "kind": "hello", "vocabulary": vocabulary, "hot_table": table}


CUSTOM = list(range(1000, 1127))
good = data(1, 0, 0x00, 0x41, 0xC0)
bad_crc = bytearray(good)
bad_crc[-1] ^= 0xFF
over_long = b"\xf0\x01\x02\x01\x00\xff\xff\x04"  # declares an 81,919-byte payload

VECTORS: list[tuple[str, str, list[bytes], list[dict[str, Any]]]] = [
    # -- token forms
    ("hot token", "0x48 is hot-table entry 72 (default table: id = byte)",
     [data(1, 0, 0x00, 0x48, 0xCF)], [text(1, [72]), end(1)]),
    ("short token", "0x81 0x2C: id = (0x01 << 8) | 0x2C = 300",
     [data(1, 0, 0x00, 0x81, 0x2C, 0xCF)], [text(1, [300]), end(1)]),
    ("long token", "0x7F then varint F0 A2 04 = 70000 (a 0xF0 inside a varint is data)",
     [data(1, 0, 0x00, 0x7F, 0xF0, 0xA2, 0x04, 0xCF)], [text(1, [70000]), end(1)]),
    ("non-shortest form", "id 5 sent as a short token is accepted",
     [data(1, 0, 0x00, 0x80, 0x05, 0xCF)], [text(1, [5]), end(1)]),
    # -- opcodes
    ("FLUSH and CHUNK_END", "FLUSH emits with boundary false, CHUNK_END with boundary true",
     [data(1, 0, 0x00, 0x41, 0xC7, 0x42, 0xC0, 0xCF)], [text(1, [65], False), text(1, [66]), end(1)]),
    ("THINK_START / THINK_END", "a mode start emits the text before it",
     [data(1, 0, 0x00, 0x41, 0xC3, 0x42, 0xC4, 0xCF)], [text(1, [65]), text(1, [66], kind="think"), end(1)]),
    ("TOOL_CALL_START / TOOL_CALL_END", "an empty buffer emits nothing",
     [data(1, 0, 0x00, 0xC1, 0x7B, 0x7D, 0xC2, 0xCF)], [text(1, [123, 125], kind="tool_call"), end(1)]),
    ("CODE_BLOCK_START / CODE_BLOCK_END", "",
     [data(1, 0, 0x00, 0xC5, 0x61, 0xC6, 0xCF)], [text(1, [97], kind="code_block"), end(1)]),
    ("thought across frames", "the second frame's entry mode (1, think) matches the stream's mode",
     [data(1, 0, 0x00, 0xC3, 0x41, 0xC7), data(1, 1, 0x01, 0x42, 0xC4, 0xCF)],
     [text(1, [65], False, kind="think"), text(1, [66], kind="think"), end(1)]),
    # -- frame kinds
    ("HELLO with a custom hot table", "hot byte 0x05 is entry 5 of the table: id 1005",
     [hello(1, 0, "v", CUSTOM), data(1, 1, 0x00, 0x00, 0x05, 0xCF)],
     [hello_chunk(1, "v", CUSTOM), text(1, [1000, 1005]), end(1)]),
    ("UPSTREAM_ERROR", "the error is reported, then the stream resets (dropping its buffer)",
     [data(1, 0, 0x00, 0x41), frame(0x03, 1, 1, b'{"plane":"rate","retryable":true}')],
     [{"stream": 1, "kind": "upstream_error", "error": {"plane": "rate", "retryable": True}},
      reset(1, "UpstreamError", 1), reset(1, "Truncated")]),
    ("two streams", "each stream has its own state and sequence",
     [data(1, 0, 0x00, 0x41), data(2, 0, 0x00, 0xC3, 0x42), data(1, 1, 0x00, 0xCF), data(2, 1, 0x01, 0xC4, 0xCF)],
     [text(1, [65]), end(1), text(2, [66], kind="think"), end(2)]),
    # -- resets inside a payload
    ("UnmatchedModeEnd", "THINK_END in text mode", [data(1, 0, 0x00, 0x41, 0xC4)],
     [reset(1, "UnmatchedModeEnd", 1), reset(1, "Truncated")]),
    ("NestedModeStart", "CODE_BLOCK_START inside a thought", [data(1, 0, 0x00, 0xC3, 0x41, 0xC5)],
     [reset(1, "NestedModeStart", 1), reset(1, "Truncated")]),
    ("ReservedOpcode", "0xC8; the rest of the frame (0x42) is dropped", [data(1, 0, 0x00, 0x41, 0xC8, 0x42)],
     [reset(1, "ReservedOpcode", 1), reset(1, "Truncated")]),
    ("VarintOverflow (6 bytes)", "a sixth varint byte", [data(1, 0, 0x00, 0x7F, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01)],
     [reset(1, "VarintOverflow"), reset(1, "Truncated")]),
    ("VarintOverflow (2^32)", "5 bytes holding 2^32", [data(1, 0, 0x00, 0x7F, 0x80, 0x80, 0x80, 0x80, 0x10)],
     [reset(1, "VarintOverflow"), reset(1, "Truncated")]),
    ("InvalidByte", "0xD0 cannot appear in a payload", [data(1, 0, 0x00, 0x41, 0xD0)],
     [reset(1, "InvalidByte", 1), reset(1, "Truncated")]),
    ("InvalidByte (0xF0 in a payload)", "0xF0 only starts frames", [data(1, 0, 0x00, 0xF0)],
     [reset(1, "InvalidByte"), reset(1, "Truncated")]),
    ("TruncatedToken", "a short token cut off by the end of the payload", [data(1, 0, 0x00, 0x41, 0x81)],
     [reset(1, "TruncatedToken", 1), reset(1, "Truncated")]),
    ("UnterminatedMode", "STREAM_END inside a tool call: the partial call is dropped",
     [data(1, 0, 0x00, 0xC1, 0x41, 0xCF)],
     [reset(1, "UnterminatedMode", 1), end(1)]),
    ("TrailingAfterEnd", "bytes after STREAM_END in the same frame", [data(1, 0, 0x00, 0x41, 0xCF, 0x42)],
     [text(1, [65]), end(1), reset(1, "TrailingAfterEnd")]),
    ("Truncated", "the input ends without STREAM_END", [data(1, 0, 0x00, 0x41)], [reset(1, "Truncated", 1)]),
    # -- frame-level resets
    ("FrameCorrupt (CRC)", "the last CRC byte is damaged: all 13 bytes are skipped", [bytes(bad_crc)],
     [reset(None, "FrameCorrupt", skipped=13)]),
    ("FrameCorrupt (junk before a frame)", "3 bytes outside any frame", [b"ABC", good],
     [reset(None, "FrameCorrupt", skipped=3), text(1, [65]), reset(1, "Truncated")]),
    ("FrameCorrupt (over-long length)", "declared length above 64 KiB is corrupt at once; the next frame decodes",
     [over_long, good], [reset(None, "FrameCorrupt", skipped=8), text(1, [65]), reset(1, "Truncated")]),
    ("FrameCorrupt (empty DATA)", "a DATA payload needs its entry-mode byte", [data(1, 0)],
     [reset(1, "FrameCorrupt"), reset(1, "Truncated")]),
    ("BadEntryMode", "entry mode 7", [data(1, 0, 0x07, 0x41)], [reset(1, "BadEntryMode"), reset(1, "Truncated")]),
    ("UnsupportedVersion", "version 2 with a valid CRC", [frame(0x02, 1, 0, b"\x00\x41", version=2)],
     [reset(1, "UnsupportedVersion"), reset(1, "Truncated")]),
    ("UnknownFrameKind", "kind 0x09 with a valid CRC", [frame(0x09, 1, 0, b"")],
     [reset(1, "UnknownFrameKind"), reset(1, "Truncated")]),
    ("SequenceGap", "seq 1 is lost: reset, then seq 2 decodes from its entry mode",
     [data(1, 0, 0x00, 0x41, 0xC0), data(1, 2, 0x00, 0x42, 0xCF)],
     [text(1, [65]), reset(1, "SequenceGap"), text(1, [66]), end(1)]),
    ("MissingHello", "a stream's first frame has seq 3: its frames are skipped until a HELLO",
     [data(1, 3, 0x00, 0x41, 0xCF), data(1, 4, 0x00, 0x42, 0xCF)], [reset(1, "MissingHello")]),
    ("BadHello", "a hot table of 126 ids", [hello(1, 0, "v", CUSTOM[:126])],
     [reset(1, "BadHello"), reset(1, "Truncated")]),
    ("ModeMismatch", "the stream is in a thought, the next frame says it starts in text",
     [data(1, 0, 0x00, 0xC3, 0x41), data(1, 1, 0x00, 0x42, 0xCF)],
     [reset(1, "ModeMismatch", 1), text(1, [66]), end(1)]),
    ("BadUpstreamError", "the payload is not a JSON object", [frame(0x03, 1, 0, b"[1]")],
     [reset(1, "BadUpstreamError"), reset(1, "Truncated")]),
]  # fmt: skip


def main() -> None:
    vectors = [
        {"name": name, "note": note, "frames": [f.hex() for f in frames], "chunks": chunks}
        for name, note, frames, chunks in VECTORS
    ]
    OUT.write_text(json.dumps({"version": 1, "vectors": vectors}, indent=1) + "\n", encoding="utf-8")
    spec = SPEC.read_text(encoding="utf-8")
    head, rest = spec.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    SPEC.write_text(head + BEGIN + "\n" + render(vectors) + END + tail, encoding="utf-8")
    print(f"wrote {len(vectors)} vectors to {OUT} and {SPEC}")


def render(vectors: list[dict[str, Any]]) -> str:
    out = []
    for v in vectors:
        out.append(f"**{v['name']}**" + (f" — {v['note']}" if v["note"] else ""))
        out.append("")
        out.append("```text")
        out.extend(" ".join(f[i : i + 2] for i in range(0, len(f), 2)) for f in v["frames"])
        out.append("```")
        out.append("")
        out.append("```json")
        out.extend(json.dumps(c) for c in v["chunks"])
        out.append("```")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()
