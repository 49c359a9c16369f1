"""groundstate.wire — SIGIL v1: a binary wire format for token streams with reset-on-ambiguity decoding.

from groundstate.wire import Encoder, Decoder
encoder = Encoder(stream_id=1)
data = encoder.hello() + encoder.text([72, 105]) + encoder.end()
chunks = Decoder().feed(data)
"""

from .chunks import Chunk, Content, Hello, Reset, StreamEnd, UpstreamError
from .constants import MODES, Mode
from .decoder import Decoder
from .encoder import Encoder

__all__ = ["MODES", "Chunk", "Content", "Decoder", "Encoder", "Hello", "Mode", "Reset", "StreamEnd", "UpstreamError"]
