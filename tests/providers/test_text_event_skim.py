"""The gateway's metrics read a relayed reply only for usage and errors; ``without_text_events`` drops the events
that can carry nothing but text before the adapter parses them. Dropping must never change what is counted: the
usage and error events from the skimmed bytes equal those from all of them, whatever the stream, wherever the
bytes begin, and whatever an attacker puts in a chunk that looks almost like text."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundstate.providers import ErrorEvent, OpenAIChatAdapter, Usage

TRANSCRIPTS = Path(__file__).parent / "transcripts" / "openai-chat"


def counted(prefix: bytes, parts: list[bytes]) -> list[str]:
    """The usage and error events an adapter yields for ``parts`` after it has read ``prefix`` (as the gateway's
    metrics see them), in order, with every detail."""
    adapter = OpenAIChatAdapter()
    adapter.feed(prefix)
    events = [event for part in parts for event in adapter.feed(part)] + adapter.close()
    return [repr(event) for event in events if isinstance(event, Usage | ErrorEvent)]


def skimmed(data: bytes) -> list[bytes]:
    return list(OpenAIChatAdapter().without_text_events(data, batch=3))


def text_chunk(content: str, **extra: object) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]} | extra  # fmt: skip
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n\n"


NEAR_MISSES = [  # each looks like a text chunk but yields usage, an error, or a change of state
    b'data: {"object":"error","choices":[]}\n\n',
    b'data: {"object":"chat.completion.chunk","error":{"message":"overloaded"},"choices":[]}\n\n',
    b'data: {"\\u0065rror":{"message":"escaped key"},"choices":[]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f"}}]}}]}\n\n',
    b'data: {"choices":5}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"x"}}],"created":' + b"9" * 5000 + b"}\n\n",
    b'data: {"choices":[{"index":0,"delta":{"content":"unterminated}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"a\\x"}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\ndata: {"usage":{"prompt_tokens":1}}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\nerror: {"message":"beside"}\n\n',
    b'data: {"choices":[]}\r\n\r\n',
    b'\xef\xbb\xbfdata: {"choices":[]}\n\n',
    b"data: [DONE]\n\n",
    b": keep-alive\n\n",
    b"\n",
    b"\r",
]

contents = st.text(max_size=12) | st.sampled_from(['"', "\\", "\n", "\u2028", "\x00", "日本", "\ud800"])
raw_bytes = st.binary(max_size=6)
pieces = st.one_of(
    contents.map(lambda c: text_chunk(c)),
    contents.map(lambda c: text_chunk(c, usage=None, obfuscation="o")),
    st.sampled_from(NEAR_MISSES),
    st.tuples(st.sampled_from([*NEAR_MISSES, text_chunk("z")]), raw_bytes).map(lambda pair: pair[0][:-2] + pair[1]),
    raw_bytes,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pieces, max_size=16), st.integers(min_value=0), st.integers(min_value=0))
def test_the_skim_counts_what_the_whole_stream_counts(events: list[bytes], cut: int, begin: int) -> None:
    """Usage and errors from the skimmed parts equal those from the bytes whole, for any mix of text chunks, near
    misses and raw bytes, with the skim starting anywhere in the stream (the gateway's held bytes after a reply
    longer than it holds start mid-stream)."""
    data = b"".join(events)
    begin %= len(data) + 1
    prefix, rest = data[:begin], data[begin:]
    assert counted(prefix, skimmed(rest)) == counted(prefix, [rest])
    cut %= len(rest) + 1
    assert counted(prefix, skimmed(rest[:cut]) + skimmed(rest[cut:])) == counted(prefix, [rest])


def test_a_recorded_stream_keeps_only_what_can_count() -> None:
    """OpenAI's recorded text stream: after the first event (never dropped: what came before it is unknown), only
    the finish, the usage and [DONE] are left for the parser."""
    recorded = (TRANSCRIPTS / "text.sse").read_bytes()
    kept = b"".join(skimmed(recorded))
    assert kept.count(b"data:") == 4
    assert b'"content":"Hel"' not in kept and b"\xe6\x97\xa5" not in kept
    assert b'"finish_reason":"stop"' in kept and b'"usage":{' in kept and kept.endswith(b"data: [DONE]\n\n")
    assert counted(b"", [kept]) == counted(b"", [recorded]) != []


def test_every_near_miss_is_kept() -> None:
    """None of the chunks that could count is taken for text, whatever surrounds it."""
    for near_miss in NEAR_MISSES:
        stream = text_chunk("a") + near_miss + text_chunk("b")
        assert near_miss in b"".join(skimmed(stream)), near_miss


def test_the_parts_are_bounded() -> None:
    """The parts hold at most ``batch`` events each, so the gateway's loop turns between them."""
    stream = b"".join(b'data: {"choices":[],"usage":{"prompt_tokens":%d}}\n\n' % n for n in range(10))
    parts = skimmed(stream)
    assert b"".join(parts) == stream and len(parts) == 4
    assert all(part.count(b"data:") <= 3 for part in parts)


REFERENCE = re.compile(b"(?:(?:" + OpenAIChatAdapter.text_only.pattern + b")\n\n)*+")


def spaced_chunk(content: str, comma: str, colon: str, created: str) -> bytes:
    """A text chunk in JSON with the given separators (spaces and tabs as JSON allows) and number for ``created``."""
    body = json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                       "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]},
                      ensure_ascii=False, separators=(comma, colon))  # fmt: skip
    body = body.replace(f"created{json.dumps('')[1:]}{colon}0", f"created{json.dumps('')[1:]}{colon}{created}")
    after_field = comma.removeprefix(",").encode()  # the same white space after the field's colon
    return b"data:" + after_field + body.encode("utf-8", "surrogatepass") + b"\n\n"


spaced = st.builds(spaced_chunk, contents, st.sampled_from([",", ", ", ",\t", " , ", ",  \t"]),
                   st.sampled_from([":", ": ", ":\t", " :\t "]),
                   st.sampled_from(["1", "-0", "1.5e3", "01", "1e", "9" * 19, "1.", "-", "2E+10"]))  # fmt: skip
high_bytes = st.binary(min_size=1, max_size=4).map(lambda raw: b'data: {"choices":[{"index":0,"delta":{"content":"'
                                                               + raw + b'"}}]}\n\n')  # fmt: skip


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pieces | spaced | high_bytes, max_size=16), st.integers(min_value=0))
def test_the_runs_are_matched_by_re2_exactly_as_re_would(events: list[bytes], begin: int) -> None:
    """The skim's runs are matched by RE2 (a DFA, without ``re``'s possessive quantifiers, in Latin-1): a run ends
    exactly where ``re`` ends it on the pattern as written, for any bytes and from any place."""
    data = b"".join(events)
    begin %= len(data) + 1
    runs = OpenAIChatAdapter.text_runs()
    assert runs is not None
    assert runs.match(data, begin).end() == REFERENCE.match(data, begin).end()  # type: ignore[union-attr]
