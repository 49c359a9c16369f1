"""``.sigil`` files: a recording is the frames, concatenated, exactly as they went over the wire."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .chunks import Chunk
from .decoder import Decoder

READ_SIZE = 64 * 1024


class Recorder:
    """Appends frames to a .sigil file as they are produced (flushed per write, so a crash loses nothing)."""

    def __init__(self, path: str | Path, mode: int = 0o600) -> None:
        """A new file is created readable by its owner only (recordings hold everything a model said)."""
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, mode)
        self._file: BinaryIO = os.fdopen(fd, "ab")

    def write(self, data: bytes) -> None:
        """Append ``data`` and flush it."""
        self._file.write(data)
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replay(path: str | Path) -> Iterator[Chunk]:
    """Decode a recording, reading it piece by piece."""
    decoder = Decoder()
    with open(path, "rb") as f:
        while data := f.read(READ_SIZE):
            yield from decoder.feed(data)
    yield from decoder.close()
