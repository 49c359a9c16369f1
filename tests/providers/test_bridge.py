"""Provider events through SIGIL and back: the same text, thoughts, calls and errors arrive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from groundstate.providers.anthropic import AnthropicAdapter
from groundstate.providers.bridge import SigilBridge
from groundstate.providers.local import LocalModel
from groundstate.wire import Content, Decoder, Mode, Reset, StreamEnd, UpstreamError
from groundstate.wire.constants import Reason
from groundstate.wire.vocab import ByteVocabulary, Detokenizer

TRANSCRIPTS = Path(__file__).parent / "transcripts" / "anthropic"


def decode(data: bytes) -> list[Any]:
    decoder = Decoder()
    return decoder.feed(data) + decoder.close()


def by_mode(chunks: list[object]) -> dict[Mode, str]:
    text: dict[Mode, str] = {}
    for chunk in chunks:
        if isinstance(chunk, Content):
            text[chunk.mode] = text.get(chunk.mode, "") + bytes(chunk.tokens).decode()
    return text


def test_provider_stream_through_sigil() -> None:
    adapter = AnthropicAdapter()
    bridge = SigilBridge(ByteVocabulary())
    wire = b"".join(bridge.push(e) for e in adapter.feed((TRANSCRIPTS / "thinking-text-tools.sse").read_bytes()))
    wire += b"".join(bridge.push(e) for e in adapter.close()) + bridge.end()
    chunks = decode(wire)
    text = by_mode(chunks)
    assert text[Mode.THINK] == "The user wants the weather."
    assert text[Mode.TEXT] == "Checking now."
    calls = [json.loads(bytes(c.tokens)) for c in chunks if isinstance(c, Content) and c.mode == Mode.TOOL_CALL]
    assert calls == [
        {"id": "toolu_1", "name": "get_weather", "arguments": {"city": "Paris"}},
        {"id": "toolu_2", "name": "now", "arguments": {}},
    ]
    assert isinstance(chunks[-1], StreamEnd) and not any(isinstance(c, Reset) for c in chunks)


def test_errors_become_upstream_error_frames_and_truncation_is_marked() -> None:
    adapter = AnthropicAdapter()
    bridge = SigilBridge(ByteVocabulary())
    events = adapter.feed((TRANSCRIPTS / "overloaded-mid-stream.sse").read_bytes()) + adapter.close()
    chunks = decode(b"".join(bridge.push(e) for e in events))
    errors = [c for c in chunks if isinstance(c, UpstreamError)]
    assert [e.error["plane"] for e in errors] == ["overload"]
    assert [c.reason for c in chunks if isinstance(c, Reset)] == [Reason.UPSTREAM_ERROR]
    assert isinstance(chunks[-1], StreamEnd)


def test_local_model_tokens_through_sigil_with_its_own_vocabulary() -> None:
    model = LocalModel(n_ctx=512)
    bridge = SigilBridge(model.vocabulary)
    generated = list(model.tokens([{"role": "user", "content": "Name two colours."}], max_tokens=24))
    wire = b"".join(bridge.tokens(Mode.TEXT, [t.id]) for t in generated) + bridge.end()
    chunks = decode(wire)
    ids = [t for c in chunks if isinstance(c, Content) for t in c.tokens]
    assert ids == [t.id for t in generated]
    detok = Detokenizer(model.vocabulary)
    assert detok.feed(ids) + detok.close() == "".join(t.text for t in generated) + model.tail_text
