"""groundstate.wire — SIGIL v1: a binary wire format for token streams with reset-on-ambiguity decoding.

from groundstate.wire import Encoder, Decoder
encoder = Encoder(stream_id=1)
data = encoder.hello() + encoder.text([72, 105]) + encoder.end()
chunks = Decoder().feed(data)

The public face: the encoder and the sans-IO decoder with the chunks it yields, vocabularies, ``.sigil`` files
(record, replay) and the ZMQ transport; errors for what calling code gives the encoder.
"""

from typing import TYPE_CHECKING, Any

from .chunks import Chunk, Content, Hello, Reset, StreamEnd, UpstreamError
from .constants import MODES, Mode, Reason
from .decoder import Decoder
from .encoder import Encoder
from .errors import EncodeError, HelloError, TransportError
from .files import Recorder, replay
from .vocab import (
    ByteVocabulary,
    Detokenizer,
    LlamaVocabulary,
    TokenizerVocabulary,
    UnknownToken,
    Vocabulary,
    vocabulary_from_spec,
)

if TYPE_CHECKING:
    from .zmq_transport import FrameReceiver, FrameSender

__all__ = [
    "MODES",
    "ByteVocabulary",
    "Chunk",
    "Content",
    "Decoder",
    "Detokenizer",
    "EncodeError",
    "Encoder",
    "FrameReceiver",
    "FrameSender",
    "Hello",
    "HelloError",
    "LlamaVocabulary",
    "Mode",
    "Reason",
    "Recorder",
    "Reset",
    "StreamEnd",
    "TokenizerVocabulary",
    "TransportError",
    "UnknownToken",
    "UpstreamError",
    "Vocabulary",
    "replay",
    "vocabulary_from_spec",
]


def __getattr__(name: str) -> Any:
    """The ZMQ transport is imported on first use: importing pyzmq costs every command that never publishes."""
    if name in ("FrameReceiver", "FrameSender"):
        from . import zmq_transport

        return getattr(zmq_transport, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
