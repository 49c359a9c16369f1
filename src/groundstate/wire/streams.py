"""SIGIL over asyncio byte streams (TCP, Unix sockets): the decoder is fed whatever the socket delivers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from .chunks import Chunk
from .decoder import Decoder

READ_SIZE = 64 * 1024


async def decode_stream(reader: asyncio.StreamReader, decoder: Decoder | None = None) -> AsyncIterator[Chunk]:
    """Chunks from a byte stream until EOF (then the decoder is closed: an unfinished stream is reported)."""
    decoder = decoder or Decoder()
    while True:
        data = await reader.read(READ_SIZE)
        if not data:
            break
        for chunk in decoder.feed(data):
            yield chunk
    for chunk in decoder.close():
        yield chunk


async def send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    await writer.drain()
