"""SIGIL over ZeroMQ: one frame per message, as ``[topic, frame]`` with topic ``sigil/<stream>/``.

PUB/SUB lets a subscriber pick streams by topic (senders should repeat the HELLO, since a late
subscriber misses the first one); PUSH/PULL delivers every frame to one of the pullers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import zmq

from .chunks import Chunk
from .decoder import Decoder
from .errors import TransportError
from .framing import split_frames

PATTERNS = {"pub": zmq.PUB, "push": zmq.PUSH, "sub": zmq.SUB, "pull": zmq.PULL}


def topic(stream_id: int) -> bytes:
    return b"sigil/%d/" % stream_id


def _open(
    endpoint: str,
    pattern: str,
    bind: bool,
    linger_ms: int,
    context: zmq.Context[zmq.Socket[bytes]] | None,
    subscribe: Sequence[bytes] = (),
) -> tuple[zmq.Socket[bytes], str]:
    """A socket of ``pattern`` bound or connected to ``endpoint``, and the endpoint it really has."""
    socket = (context or zmq.Context.instance()).socket(PATTERNS[pattern])
    socket.setsockopt(zmq.LINGER, linger_ms)
    for prefix in subscribe:
        socket.setsockopt(zmq.SUBSCRIBE, prefix)
    (socket.bind if bind else socket.connect)(endpoint)
    return socket, socket.getsockopt_string(zmq.LAST_ENDPOINT) if bind else endpoint


class FrameSender:
    """Sends encoder output frame by frame on a PUB or PUSH socket."""

    def __init__(
        self,
        endpoint: str,
        pattern: str = "pub",
        *,
        bind: bool = True,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ):
        if pattern not in ("pub", "push"):
            raise TransportError("a sender is 'pub' or 'push'")
        self.socket, self.endpoint = _open(endpoint, pattern, bind, 1000, context)

    def send(self, data: bytes) -> int:
        """Send each frame of ``data`` as its own message; returns how many."""
        frames = split_frames(data)
        for stream_id, frame in frames:
            self.socket.send_multipart([topic(stream_id), frame])
        return len(frames)

    def close(self) -> None:
        """Close the socket."""
        self.socket.close()


class FrameReceiver:
    """Receives frames on a SUB or PULL socket and decodes them; every stream, or only ``streams``."""

    def __init__(
        self,
        endpoint: str,
        pattern: str = "sub",
        *,
        streams: list[int] | None = None,
        bind: bool = False,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ):
        if pattern not in ("sub", "pull"):
            raise TransportError("a receiver is 'sub' or 'pull'")
        topics = ([topic(s) for s in streams] if streams else [b"sigil/"]) if pattern == "sub" else []
        self.socket, self.endpoint = _open(endpoint, pattern, bind, 0, context, topics)
        self.decoder = Decoder()

    def receive(self, timeout_ms: int | None = None) -> Iterator[Chunk]:
        """Decode messages as they come; stops when none arrives within ``timeout_ms`` (None: never)."""
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        while True:
            if not poller.poll(timeout_ms):
                return
            parts = self.socket.recv_multipart()
            yield from self.decoder.feed(parts[-1])  # the frame is the last part; a damaged one is reported

    def close(self) -> list[Chunk]:
        """Close the socket; the decoder's final chunks."""
        self.socket.close()
        return self.decoder.close()
