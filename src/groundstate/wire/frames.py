"""The 0xF0 frame envelope: building frames, and a sans-IO scanner that finds them in a byte stream.

``0xF0 | version | kind | varint stream_id | varint seq | varint payload_len | payload | CRC-32C (LE)``,
the CRC over version .. payload. The scanner never stalls: a candidate that fails any check is given up
one byte after its 0xF0, and the scan resumes there.
"""

from __future__ import annotations

from dataclasses import dataclass

from .constants import CRC_BYTES, DEFAULT_MAX_PAYLOAD, FRAME_START, VERSION
from .crc import crc32c
from .varint import INCOMPLETE, OVERFLOW, decode_varint, encode_varint


@dataclass(slots=True)
class Frame:
    version: int
    kind: int
    stream_id: int
    seq: int
    payload: bytes
    offset: int = 0  # where the frame starts in the whole input
    size: int = 0  # bytes on the wire


@dataclass(slots=True)
class Junk:
    """Bytes that belong to no valid frame, since the last good frame."""

    offset: int
    skipped: int
    why: str


def encode_frame(kind: int, stream_id: int, seq: int, payload: bytes, version: int = VERSION) -> bytes:
    body = (
        bytes((version, kind)) + encode_varint(stream_id) + encode_varint(seq) + encode_varint(len(payload)) + payload
    )
    return b"\xf0" + body + crc32c(body).to_bytes(CRC_BYTES, "little")


class _Wait:
    """More bytes are needed to decide."""


_WAIT = _Wait()


class FrameScanner:
    """Feed bytes, get frames and junk records; incomplete frames are kept for the next feed."""

    def __init__(self, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
        self.max_payload = max_payload
        self._buf = bytearray()
        self._base = 0  # offset of _buf[0] in the whole input
        self._junk_start = -1
        self._junk = 0
        self._junk_why = ""

    def feed(self, data: bytes) -> list[Frame | Junk]:
        """The frames and junk these bytes complete (incomplete frames wait for the next feed)."""
        self.add(data)
        return self._scan(final=False)

    def add(self, data: bytes) -> None:
        """Buffer bytes without scanning them (the decoder's compiled loop reads ``buffer`` first)."""
        self._buf += data

    def next(self) -> list[Frame | Junk]:
        """The next frame in the buffer and the junk before it, or [] while it is incomplete."""
        return self._scan(final=False, one=True)

    @property
    def buffer(self) -> bytearray:
        """The buffered bytes, for a reader that takes whole frames from the start (then ``consume``)."""
        return self._buf

    @property
    def at_frame_start(self) -> bool:
        """Whether no skipped bytes wait to be reported (so a frame at the buffer's start is the next item)."""
        return self._junk == 0

    def consume(self, count: int) -> None:
        """Drop the first ``count`` buffered bytes: whole frames another reader has taken."""
        del self._buf[:count]
        self._base += count

    def close(self) -> list[Frame | Junk]:
        out = self._scan(final=True)
        out.extend(self._flush_junk())
        return out

    @property
    def pending(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._buf)

    def _skip(self, offset: int, count: int, why: str) -> None:
        if self._junk == 0:
            self._junk_start, self._junk_why = offset, why
        self._junk += count

    def _flush_junk(self) -> list[Frame | Junk]:
        if not self._junk:
            return []
        junk = Junk(self._junk_start, self._junk, self._junk_why)
        self._junk = 0
        return [junk]

    def _scan(self, final: bool, one: bool = False) -> list[Frame | Junk]:
        buf = self._buf
        n = len(buf)
        p = 0
        out: list[Frame | Junk] = []
        while p < n:
            if buf[p] != FRAME_START:
                q = buf.find(b"\xf0", p)
                q = n if q < 0 else q
                self._skip(self._base + p, q - p, "bytes outside any frame")
                p = q
                continue
            result = self._parse(buf, p, n)
            if isinstance(result, Frame):
                out.extend(self._flush_junk())
                out.append(result)
                p += result.size
                if one:
                    break
                continue
            if isinstance(result, _Wait):
                if not final:
                    break
                result = "frame cut off by the end of the input"
            self._skip(self._base + p, 1, result)
            p += 1
        del buf[:p]
        self._base += p
        return out

    def _parse(self, buf: bytearray, p: int, n: int) -> Frame | str | _Wait:
        """A frame starting at p, _WAIT if more bytes are needed, or why this is not a frame."""
        if n - p < 3:
            return _WAIT
        version, kind = buf[p + 1], buf[p + 2]
        i = p + 3
        fields = []
        for _ in range(3):
            if i < n and buf[i] < 0x80:  # one-byte varint: the common case
                fields.append(buf[i])
                i += 1
                continue
            value, i = decode_varint(buf, i, n)
            if value == INCOMPLETE:
                return _WAIT
            if value == OVERFLOW:
                return "malformed header varint"
            fields.append(value)
        stream_id, seq, length = fields
        if length > self.max_payload:
            return f"declared payload of {length} bytes exceeds the {self.max_payload}-byte limit"
        end = i + length + CRC_BYTES
        if end > n:
            return _WAIT
        if crc32c(bytes(buf[p + 1 : i + length])) != int.from_bytes(buf[i + length : end], "little"):
            return "CRC-32C mismatch"
        payload = bytes(buf[i : i + length])
        return Frame(version, kind, stream_id, seq, payload, self._base + p, end - p)
