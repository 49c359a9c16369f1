"""Types of the compiled frame loop (_frameloop.c)."""

from typing import Any

def run(
    buffer: bytes | bytearray | memoryview,
    start: int,
    stream: int,
    expected: int,
    mode: int,
    hot: tuple[int, ...],
    max_payload: int,
    tokens: list[int],
    out: list[Any],
    content: type,
    modes: tuple[Any, ...],
) -> tuple[int, int, int, int]:
    """Take the common DATA frames of one stream from ``start``: (position after them, next seq, mode, frames taken)."""

def crc(data: bytes | bytearray | memoryview, table_only: bool = False) -> int:
    """CRC-32C of ``data`` as the loop checks frames (SSE 4.2's instruction where the processor has it); with
    ``table_only``, by the lookup table."""
