"""The tokens a whole (non-streamed) reply says it used: what OpenAI's and Anthropic's SDKs, the Agents SDK and
LangChain ask for by default (``stream: false``), so a gateway that counted only streams counted nothing for them.

The reply comes from the upstream: it is parsed with the project's bounded JSON reader, and anything but whole
non-negative numbers where the counts belong counts nothing (never an error: the reply already went to the client).
"""

from __future__ import annotations

from typing import Any

from .. import safejson
from .normalized import token_count

MAX_REPLY_BYTES = 8 << 20  # a whole reply is kept for counting up to this size; past it, it is not counted


def reply_usage(body: bytes) -> tuple[int, int] | None:
    """(input tokens, output tokens) of a whole reply: OpenAI's chat completions (``usage.prompt_tokens``,
    ``completion_tokens``), its Responses API and Anthropic's messages (``usage.input_tokens``, ``output_tokens``),
    Ollama's (``prompt_eval_count``, ``eval_count``). None when the reply says nothing usable."""
    try:
        data = safejson.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    used = data.get("usage")
    if isinstance(used, dict):
        for names in (("prompt_tokens", "completion_tokens"), ("input_tokens", "output_tokens")):
            counted = _counts(used, *names)
            if counted is not None:
                return counted
    return _counts(data, "prompt_eval_count", "eval_count")


def _counts(data: dict[str, Any], inputs: str, outputs: str) -> tuple[int, int] | None:
    given = token_count(data.get(inputs)), token_count(data.get(outputs))
    if given == (None, None):
        return None
    return given[0] or 0, given[1] or 0
