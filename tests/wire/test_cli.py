"""``groundstate wire`` encode / decode / dump / profile, run as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def sigil(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "groundstate", "wire", *args], input=stdin, capture_output=True, timeout=60, check=False
    )


EVENTS = [
    {"event": "text", "text": "Héllo "},
    {"event": "think", "text": "hmm…"},
    {"event": "chunk_end"},
    {"event": "tool_call", "text": '{"q": 1}', "stream": 2},
    {"event": "text", "text": "done"},
]


def test_encode_jsonl_then_decode_both_formats(tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    source.write_text("\n".join(json.dumps(e) for e in EVENTS) + "\n", encoding="utf-8")
    out = tmp_path / "run.sigil"
    encoded = sigil("encode", str(source), "-o", str(out))
    assert encoded.returncode == 0, encoded.stderr
    decoded = sigil("decode", str(out), "--jsonl")
    assert decoded.returncode == 0, decoded.stderr
    records = [json.loads(line) for line in decoded.stdout.decode().splitlines()]
    kinds = [(r["stream"], r["kind"]) for r in records]
    assert kinds == [
        (1, "hello"), (1, "text"), (1, "think"), (2, "hello"), (1, "text"), (1, "stream_end"),
        (2, "tool_call"), (2, "stream_end"),
    ]  # fmt: skip
    assert bytes(records[1]["tokens"]).decode() == "Héllo "
    human = sigil("decode", str(out)).stdout.decode().splitlines()
    assert "[1] think: 'hmm…'" in human and "[2] tool_call: '{\"q\": 1}'" in human


def test_plain_text_from_stdin_and_a_damaged_file(tmp_path: Path) -> None:
    out = tmp_path / "text.sigil"
    assert sigil("encode", "-", "-o", str(out), stdin=b"one\ntwo\n").returncode == 0
    lines = sigil("decode", str(out)).stdout.decode().splitlines()
    assert lines[1:] == ["[1] text: 'one\\n'", "[1] text: 'two\\n'", "[1] end of stream"]
    data = bytearray(out.read_bytes())
    data[-3] ^= 0xFF
    out.write_bytes(bytes(data))
    damaged = sigil("decode", str(out))
    assert damaged.returncode == 1
    assert "RESET FrameCorrupt" in damaged.stdout.decode()


def test_dump_annotates_frames_and_tokens(tmp_path: Path) -> None:
    out = tmp_path / "d.sigil"
    source = tmp_path / "e.jsonl"
    source.write_text('{"event": "text", "tokens": [65, 300, 70000]}\n', encoding="utf-8")
    sigil("encode", str(source), "-o", str(out))
    lines = sigil("dump", str(out)).stdout.decode().splitlines()
    assert lines[0].startswith("00000000  HELLO stream=1 seq=0")
    assert "          41  hot x1" in lines
    assert "          81 2c  short token 300" in lines
    assert "          7f f0 a2 04  long token 70000" in lines
    assert "          cf  STREAM_END" in lines


def test_profile_and_encode_with_the_hot_table(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("zzzzz yyyy " * 50, encoding="utf-8")
    table = tmp_path / "table.json"
    assert sigil("profile", str(corpus), "-o", str(table)).returncode == 0
    profile = json.loads(table.read_text())
    assert profile["hot_table"][:3] == [ord("z"), ord("y"), ord(" ")]
    source = tmp_path / "t.txt"
    source.write_text("zzyy", encoding="utf-8")
    out = tmp_path / "h.sigil"
    assert sigil("encode", str(source), "-o", str(out), "--hot-table", str(table)).returncode == 0
    assert b"\x00\x00\x01\x01" in out.read_bytes()  # z and y are hot bytes 0 and 1 now
    lines = sigil("decode", str(out)).stdout.decode().splitlines()
    assert "[1] text: 'zzyy'" in lines


def test_bad_input_is_reported(tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text('{"event": "text", "text": "ok"}\n{"event": "sing"}\n', encoding="utf-8")
    result = sigil("encode", str(source), "-o", str(tmp_path / "x.sigil"))
    assert result.returncode == 2
    assert b"line 2: unknown event 'sing'" in result.stderr
