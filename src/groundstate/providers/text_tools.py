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
from .think_tags import partial_suffix

STYLES = {"hermes": ("<tool_call>", "</tool_call>"), "mistral": ("[TOOL_CALLS]", None)}


class UnknownStyle(ConfigurationError, ValueError):
    """A text tool-call style this module does not know."""


class TextToolCalls:
    def __init__(self, style: str) -> None:
        if style not in STYLES:
            raise UnknownStyle(f"text tool-call style must be one of {', '.join(STYLES)}")
        self.open_tag, self.close_tag = STYLES[style]
        self._inside = False
        self._held = ""
        self._span: list[str] = []
        self._count = 0

    def feed(self, text: str) -> list[Event]:
        out: list[Event] = []
        text = self._held + text
        self._held = ""
        while text:
            if self._inside:
                end = text.find(self.close_tag) if self.close_tag else -1
                if end >= 0:
                    self._span.append(text[:end])
                    self._calls("".join(self._span), out)
                    self._span, self._inside = [], False
                    text = text[end + len(self.close_tag) :]  # type: ignore[arg-type]
                    continue
                keep = partial_suffix(text, self.close_tag) if self.close_tag else 0
                self._span.append(text[: len(text) - keep])
            else:
                start = text.find(self.open_tag)
                if start >= 0:
                    if start:
                        out.append(TextDelta(text[:start]))
                    self._inside = True
                    text = text[start + len(self.open_tag) :]
                    continue
                keep = partial_suffix(text, self.open_tag)
                if len(text) > keep:
                    out.append(TextDelta(text[: len(text) - keep]))
            self._held = text[len(text) - keep :]
            break
        return out

    def close(self) -> list[Event]:
        out: list[Event] = []
        if self._inside:
            self._span.append(self._held)
            if self.close_tag is None:  # a Mistral array runs to the end of the output
                self._calls("".join(self._span), out)
            else:
                raw = "".join(self._span)
                out.append(ToolCall(self._next(), None, None, None, "the output ended inside a tool call", raw))
        elif self._held:
            out.append(TextDelta(self._held))
        self._held, self._span, self._inside = "", [], False
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
