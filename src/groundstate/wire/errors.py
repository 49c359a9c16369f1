"""Errors of the SIGIL package: what calling code or a peer gave that is not SIGIL.

The decoder itself never raises on bytes from a peer — it resets (``Reset`` chunks, docs/sigil.md); these errors
are for the encoder's inputs, vocabularies, the encoder's JSON-lines input and transport options.
"""

from __future__ import annotations

from ..errors import ConfigurationError, InputError


class EncodeError(InputError, ValueError):
    """What the encoder was given cannot be encoded (a token id beyond 2**32 - 1, bytes that are not encoder output)."""


class TransportError(ConfigurationError, ValueError):
    """A transport was asked for something it does not do (a ZMQ socket kind other than pub/push/sub/pull)."""


class HelloError(InputError, ValueError):
    """A HELLO payload (from a peer or an encoder's caller) is malformed; the decoder turns it into a reset."""
