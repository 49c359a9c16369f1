"""A run's recording: one ``.sigil`` file per run, every model answer in it a SIGIL stream of its own, and an index
that says whose each stream is.

``runs/RUN/recordings/run.sigil`` holds the frames exactly as the answers streamed (agents running at once
interleave frame by frame; each answer's frames carry its stream id, so decoding the file gives each answer back
whole); ``index.jsonl`` has a line per stream — its id, the agent, the attempt, the round and the model — written
before the stream's first frame. One file per run instead of one per round: creating a file per round cost more
than the round's frames (docs/benchmarks.md, "Runtime"). A resumed run appends to both, its stream ids continuing
after the last one indexed. Every write is flushed, so a crash loses nothing that was sent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ..wire import Chunk, Recorder, replay

RECORDING = "run.sigil"
INDEX = "index.jsonl"


class RunRecording:
    """The recording of one run, opened on its first stream and closed when its driver stops."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._recorder: Recorder | None = None
        self._index: TextIO | None = None
        self._next = 0

    def stream(self, agent: str, attempt: int, round_number: int, model: str) -> int:
        """A new stream for one model's answer in one round: its id, indexed before any of its frames."""
        if self._recorder is None:
            known = recording_index(self.folder)
            self._next = max((entry["stream"] for entry in known), default=0) + 1
            self._recorder = Recorder(self.folder / RECORDING)
            fd = os.open(self.folder / INDEX, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._index = os.fdopen(fd, "a", encoding="utf-8")
        assert self._index is not None
        number, self._next = self._next, self._next + 1
        entry = {"stream": number, "agent": agent, "attempt": attempt, "round": round_number, "model": model}
        self._index.write(json.dumps(entry) + "\n")
        self._index.flush()
        return number

    def write(self, data: bytes) -> None:
        """Append frames (whole ones: a stream's frames never split another's)."""
        if data:
            assert self._recorder is not None, "write() before stream()"
            self._recorder.write(data)

    def close(self) -> None:
        """Close the files (a later driver of the run reopens them)."""
        if self._recorder is not None:
            self._recorder.close()
        if self._index is not None:
            self._index.close()
        self._recorder = self._index = None


def recording_index(folder: Path) -> list[dict[str, Any]]:
    """The index of a run's recording: one entry per stream, in the order they started."""
    path = folder / INDEX
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def recorded_answers(folder: Path) -> Iterator[tuple[dict[str, Any], list[Chunk]]]:
    """Each indexed stream with its chunks, decoded from the run's recording."""
    by_stream: dict[int, list[Chunk]] = {}
    path = folder / RECORDING
    if path.exists():
        for chunk in replay(path):
            stream = getattr(chunk, "stream", None)
            if stream is not None:
                by_stream.setdefault(stream, []).append(chunk)
    for entry in recording_index(folder):
        yield entry, by_stream.get(entry["stream"], [])
