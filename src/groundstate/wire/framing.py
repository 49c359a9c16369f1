"""Split encoder output into single frames, for transports that send one frame per message."""

from __future__ import annotations

from .errors import EncodeError
from .frames import Frame, FrameScanner


def split_frames(data: bytes) -> list[tuple[int, bytes]]:
    """(stream id, frame bytes) for each frame of well-formed encoder output."""
    scanner = FrameScanner()
    items = scanner.feed(data) + scanner.close()
    out = []
    for item in items:
        if not isinstance(item, Frame):
            raise EncodeError(f"not encoder output: {item.why} at byte {item.offset}")
        out.append((item.stream_id, data[item.offset : item.offset + item.size]))
    return out
