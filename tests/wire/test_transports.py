"""Transports over real sockets on loopback: ZMQ PUSH/PULL and PUB/SUB, TCP, Unix sockets, .sigil files.

In each, one frame is damaged in transit: the damaged frame is reported and the next frame decodes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import zmq

from groundstate.wire import Content, Decoder, Encoder, FrameReceiver, FrameSender, Recorder, Reset, StreamEnd, replay
from groundstate.wire.framing import split_frames
from groundstate.wire.streams import decode_stream, send
from groundstate.wire.zmq_transport import topic


def conversation(stream: int = 1) -> list[bytes]:
    """Frames of a short exchange: HELLO, three text chunks, a thought, the end."""
    encoder = Encoder(stream)
    data = encoder.hello()
    for word in (b"alpha ", b"beta ", b"gamma "):
        data += encoder.text(word) + encoder.chunk_end()
    data += encoder.think(b"hmm") + encoder.end()
    return [frame for _, frame in split_frames(data)]


def damaged(frames: list[bytes], index: int) -> list[bytes]:
    out = list(frames)
    frame = bytearray(out[index])
    frame[len(frame) // 2] ^= 0x5A
    out[index] = bytes(frame)
    return out


def texts(chunks: list[Any]) -> list[bytes]:
    return [bytes(c.tokens) for c in chunks if isinstance(c, Content)]


def check_damage_reported(chunks: list[Any]) -> None:
    """Frame 2 (b'beta ') was damaged: it is reported, lost, and the frames after it decode."""
    assert texts(chunks) == [b"alpha ", b"gamma ", b"hmm"]
    resets = [c.reason for c in chunks if isinstance(c, Reset)]
    assert resets == ["FrameCorrupt", "SequenceGap"]
    assert isinstance(chunks[-1], StreamEnd)


def test_zmq_push_pull_with_a_damaged_frame() -> None:
    sender = FrameSender("tcp://127.0.0.1:*", "push")
    receiver = FrameReceiver(sender.endpoint, "pull")
    for frame in damaged(conversation(), 2):
        sender.socket.send_multipart([topic(1), frame])
    chunks = list(receiver.receive(timeout_ms=2000))
    chunks += receiver.close()
    sender.close()
    check_damage_reported(chunks)


def test_zmq_pub_sub_filters_streams_by_topic() -> None:
    sender = FrameSender("tcp://127.0.0.1:*", "pub")
    receiver = FrameReceiver(sender.endpoint, "sub", streams=[2])
    probe = Encoder(2)
    deadline = time.monotonic() + 10
    seen: list[Any] = []
    while not seen and time.monotonic() < deadline:  # a late subscriber misses messages: repeat the HELLO
        sender.send(probe.hello())
        probe.seq = 0
        seen = list(receiver.receive(timeout_ms=100))
    assert seen, "the subscription never became active"
    one, two = Encoder(1), Encoder(2)
    two.seq = 1
    sender.send(one.hello() + one.text(b"not for us") + one.end())
    sender.send(two.text(b"for us") + two.end())
    chunks = list(receiver.receive(timeout_ms=1000)) + receiver.close()
    sender.close()
    assert texts(chunks) == [b"for us"]
    assert all(c.stream == 2 for c in chunks)


def test_frame_sender_sends_one_message_per_frame() -> None:
    context: Any = zmq.Context.instance()
    pull = context.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    sender = FrameSender(f"tcp://127.0.0.1:{port}", "push", bind=False)
    frames = conversation(7)
    assert sender.send(b"".join(frames)) == len(frames)
    received = [pull.recv_multipart() for _ in frames]
    assert received == [[b"sigil/7/", f] for f in frames]
    sender.close()
    pull.close()


async def _serve_and_send(start: Any, connect: Any, pieces: list[bytes]) -> list[Any]:
    received: list[Any] = []
    done = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for chunk in decode_stream(reader):
            received.append(chunk)
        writer.close()
        done.set()

    server = await start(handle)
    async with server:
        _, writer = await connect(server)
        for piece in pieces:
            await send(writer, piece)
            await asyncio.sleep(0)
        writer.close()
        await writer.wait_closed()
        await asyncio.wait_for(done.wait(), 10)
    return received


def _pieces(frames: list[bytes], size: int = 7) -> list[bytes]:
    data = b"".join(frames)
    return [data[i : i + size] for i in range(0, len(data), size)]  # frames split across socket writes


def test_tcp_stream_with_a_damaged_frame() -> None:
    chunks = asyncio.run(
        _serve_and_send(
            lambda handle: asyncio.start_server(handle, "127.0.0.1", 0),
            lambda server: asyncio.open_connection(*server.sockets[0].getsockname()[:2]),
            _pieces(damaged(conversation(), 2)),
        )
    )
    check_damage_reported(chunks)


def test_unix_socket_stream_with_a_damaged_frame(tmp_path: Path) -> None:
    path = str(tmp_path / "sigil.sock")
    chunks = asyncio.run(
        _serve_and_send(
            lambda handle: asyncio.start_unix_server(handle, path),
            lambda server: asyncio.open_unix_connection(path),
            _pieces(damaged(conversation(), 2), 5),
        )
    )
    check_damage_reported(chunks)


def test_recording_and_replay(tmp_path: Path) -> None:
    path = tmp_path / "run.sigil"
    frames = conversation()
    with Recorder(path) as recorder:
        for frame in frames:
            recorder.write(frame)
    assert path.read_bytes() == b"".join(frames)
    decoder = Decoder()
    assert list(replay(path)) == decoder.feed(b"".join(frames)) + decoder.close()


def test_tail_command_decodes_a_live_stream() -> None:
    context: Any = zmq.Context.instance()
    push = context.socket(zmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    tail = subprocess.Popen(
        [sys.executable, "-m", "groundstate", "wire", "tail", "--connect", f"tcp://127.0.0.1:{port}",
         "--pattern", "pull", "--jsonl", "--idle", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for frame in conversation(4):
        push.send_multipart([topic(4), frame])
    out, err = tail.communicate(timeout=60)
    push.close()
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["kind"] for r in records] == ["hello", "text", "text", "text", "think", "stream_end"], err
    assert bytes(records[1]["tokens"]) == b"alpha "
