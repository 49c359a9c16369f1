"""Tool calls written as text, a property of the model (configured, never guessed).

- ``hermes`` (Hermes, Qwen): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` spans inside the
  text, possibly split across chunks; several may follow each other.
- ``mistral``: ``[TOOL_CALLS]`` followed by a JSON array of calls, up to the end of the output.

A call's object may say ``parameters`` instead of ``arguments`` (Llama). A span that is not valid JSON, or
not a call object, becomes a ToolCall with ``arguments`` None and the reason — never repaired, never shown
as text either (it was meant as a call). A span still open at the end is reported incomplete.
"""

from __future__ import annotations

import json
from typing import Any

from .. import safejson
from ..errors import ConfigurationError
from .normalized import Event, TextDelta, ToolCall
from .tag_split import TagSplitter

STYLES = {"hermes": ("<tool_call>", "</tool_call>"), "mistral": ("[TOOL_CALLS]", None)}


class UnknownStyle(ConfigurationError, ValueError):
    """A text tool-call style this module does not know."""


class TextToolCalls:
    """Tool calls written as text in one of ``STYLES``, split out of the text deltas."""

    def __init__(self, style: str) -> None:
        if style not in STYLES:
            raise UnknownStyle(f"text tool-call style must be one of {', '.join(STYLES)}")
        self.open_tag, self.close_tag = STYLES[style]
        self._splitter = TagSplitter(self.open_tag, self.close_tag)
        self._span: list[str] = []
        self._count = 0

    def feed(self, text: str) -> list[Event]:
        """Text deltas and the calls whose spans this chunk closes."""
        out: list[Event] = []
        for side, piece in self._splitter.feed(text):
            if side == "outside":
                out.append(TextDelta(piece))
            elif side == "inside":
                self._span.append(piece)
            elif side == "closed":
                self._calls("".join(self._span), out)
                self._span = []
        return out

    def close(self) -> list[Event]:
        """The end of the output: a Mistral array is parsed; a Hermes span still open is reported incomplete."""
        out: list[Event] = []
        side, held = self._splitter.close()
        if side == "inside":
            self._span.append(held)
            if self.close_tag is None:  # a Mistral array runs to the end of the output
                self._calls("".join(self._span), out)
            else:
                raw = "".join(self._span)
                out.append(ToolCall(self._next(), None, None, None, "the output ended inside a tool call", raw))
        elif held:
            out.append(TextDelta(held))
        self._span = []
        self._splitter = TagSplitter(self.open_tag, self.close_tag)
        return out

    def _next(self) -> int:
        self._count += 1
        return self._count - 1

    def _calls(self, raw: str, out: list[Event]) -> None:
        try:
            parsed: Any = safejson.loads(raw)
        except json.JSONDecodeError as exc:
            out.append(
                ToolCall(self._next(), None, None, None, f"not valid JSON: {exc.msg} at character {exc.pos}", raw)
            )
            return
        except ValueError as exc:  # too deep, or a non-finite number
            out.append(ToolCall(self._next(), None, None, None, f"not usable JSON: {exc}", raw))
            return
        arrays = self.close_tag is None  # a Mistral marker introduces an array; a Hermes span is one call
        for item in parsed if arrays and isinstance(parsed, list) else [parsed]:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                out.append(ToolCall(self._next(), None, None, None, "not a tool call object with a name", raw))
                continue
            arguments = item.get("arguments", item.get("parameters", {}))
            if isinstance(arguments, str):  # some models double-encode the arguments
                encoded: str = arguments
                try:
                    arguments = safejson.loads(encoded) if encoded.strip() else {}
                except ValueError as exc:
                    error = f"arguments are not valid JSON: {getattr(exc, 'msg', exc)}"
                    out.append(ToolCall(self._next(), item.get("id"), item["name"], None, error, encoded))
                    continue
            out.append(ToolCall(self._next(), item.get("id"), item["name"], arguments, None, json.dumps(item)))
