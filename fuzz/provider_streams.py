"""atheris fuzz harness for provider streams: the SSE parser, every API's adapter, error classification.

    python fuzz/provider_streams.py WORKDIR fuzz/provider-corpus -atheris_runs=1000000

The first byte picks the API and a chunk size; the rest is fed to the adapter whole and in chunks. The harness
fails on any exception, on events that depend on the chunking, on JSONL output that is not strict JSON, and on
usage or errors that differ when the events that can carry only text are dropped first (what the gateway's
metrics do), from the start or from the middle of the stream.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from groundstate import safejson
    from groundstate.providers.anthropic import AnthropicAdapter
    from groundstate.providers.errors import classify
    from groundstate.providers.normalized import ErrorEvent, Usage, merge_deltas, to_json
    from groundstate.providers.ollama import OllamaAdapter
    from groundstate.providers.openai_chat import OpenAIChatAdapter
    from groundstate.providers.openai_responses import OpenAIResponsesAdapter

ADAPTERS = (OpenAIChatAdapter, OpenAIResponsesAdapter, AnthropicAdapter, OllamaAdapter)


def events(kind: type, data: bytes, step: int) -> list[str]:
    adapter = kind("fuzz")
    out = []
    for i in range(0, len(data), step):
        out += adapter.feed(data[i : i + step])
    out += adapter.close()
    return [safejson.dumps_line(to_json(e)) for e in merge_deltas(out)]


def counted(kind: type, prefix: bytes, parts: list[bytes]) -> list[str]:
    """The usage and error events after ``prefix``, as the gateway's metrics count them."""
    adapter = kind("fuzz")
    adapter.feed(prefix)
    out = [event for part in parts for event in adapter.feed(part)] + adapter.close()
    return [repr(event) for event in out if isinstance(event, Usage | ErrorEvent)]


def test_one_input(data: bytes) -> None:
    if not data:
        return
    kind, body = ADAPTERS[data[0] % len(ADAPTERS)], data[1:]
    if events(kind, body, data[0] % 13 + 1) != events(kind, body, max(len(body), 1)):
        raise AssertionError("the events depend on the chunking")
    prefix, rest = body[: data[0] % 61], body[data[0] % 61 :]
    if counted(kind, prefix, list(kind("fuzz").without_text_events(rest, 3))) != counted(kind, prefix, [rest]):
        raise AssertionError("dropping the text-only events changed the usage or the errors")
    record = classify("fuzz", 400 + data[0] % 200, body, {"retry-after": body[:20].decode("latin-1")})
    safejson.dumps_line(to_json(ErrorEvent(record)))


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
