"""The SIGIL v1 test vectors of docs/sigil-vectors.json, decoded whole and byte by byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from groundstate.wire import Decoder, Reset

DOCS = Path(__file__).parents[2] / "docs"
VECTORS = json.loads((DOCS / "sigil-vectors.json").read_text(encoding="utf-8"))["vectors"]


def inspect(data: bytes, piece: int | None = None) -> list[dict[str, Any]]:
    decoder = Decoder()
    chunks = []
    step = piece or max(len(data), 1)
    for i in range(0, len(data), step):
        chunks += decoder.feed(data[i : i + step])
    chunks += decoder.close()
    out = []
    for chunk in chunks:
        record = chunk.to_json()
        if isinstance(chunk, Reset):
            record.pop("detail", None)
        out.append(record)
    return out


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector: dict[str, Any]) -> None:
    data = b"".join(bytes.fromhex(f) for f in vector["frames"])
    assert inspect(data) == vector["chunks"]
    assert inspect(data, 1) == vector["chunks"]


def test_every_reset_reason_has_a_vector() -> None:
    from groundstate.wire import Reason

    covered = {c["reason"] for v in VECTORS for c in v["chunks"] if c["kind"] == "reset"}
    # TooManyStreams needs 1,025 open streams; tests/wire/test_hostile.py covers it with a small bound
    needs_vectors = {v for k, v in vars(Reason).items() if not k.startswith("_")} - {Reason.TOO_MANY_STREAMS}
    assert needs_vectors <= covered


def test_vectors_are_in_the_spec() -> None:
    spec = (DOCS / "sigil.md").read_text(encoding="utf-8")
    for vector in VECTORS:
        for frame in vector["frames"]:
            assert " ".join(frame[i : i + 2] for i in range(0, len(frame), 2)) in spec, vector["name"]
