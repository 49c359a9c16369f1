"""groundstate.providers — upstream LLM streams turned into typed events, never guessed.

Built so far: the sans-IO Server-Sent Events parser (``groundstate.providers.sse``).
"""

from .sse import ServerSentEvent, SSEParser, SSETruncated

__all__ = ["SSEParser", "SSETruncated", "ServerSentEvent"]
