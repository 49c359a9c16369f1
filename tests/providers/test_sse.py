"""The SSE parser against the WHATWG rules and the transport edge cases seen in the wild."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.providers import ServerSentEvent, SSEParser, SSETruncated

from ..pieces import split_at


def parse(data: bytes, cuts: list[int] = ()) -> list[Any]:  # type: ignore[assignment]
    parser = SSEParser()
    out: list[Any] = [e for piece in split_at(data, cuts) for e in parser.feed(piece)]
    return out + parser.close()


def datas(events: list[Any]) -> list[str]:
    return [e.data for e in events if isinstance(e, ServerSentEvent)]


def test_openai_style_stream() -> None:
    body = b'data: {"a": 1}\n\ndata: {"a": 2}\n\ndata: [DONE]\n\n'
    assert datas(parse(body)) == ['{"a": 1}', '{"a": 2}', "[DONE]"]


def test_line_endings_crlf_lf_and_bare_cr_mixed() -> None:
    body = b"data: one\r\n\r\ndata: two\n\ndata: three\r\rdata: four\r\n\n"
    assert datas(parse(body)) == ["one", "two", "three", "four"]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    body = b"data: a\r\n\r\ndata: b\r\n\r\n"
    for cut in range(len(body) + 1):
        assert datas(parse(body, [cut])) == ["a", "b"], cut


def test_bom_comments_fields_and_spaces() -> None:
    body = (
        "\ufeff: keep-alive\n"
        ": OPENROUTER PROCESSING\n"
        "event: delta\n"
        "data:x\n"  # no space after the colon
        "data:  two spaces\n"  # exactly one leading space is removed
        "id: 7\n"
        "retry: 1500\n"
        "\n"
        "data\n"  # a field name without a colon: empty value
        "\n"
    ).encode()
    first, second = parse(body)
    assert (first.event, first.data, first.id, first.retry) == ("delta", "x\n two spaces", "7", 1500)
    assert (second.event, second.data, second.id) == ("message", "", "7")  # the id persists


def test_retry_must_be_all_ascii_digits_and_id_must_not_contain_null() -> None:
    body = "retry: 12a\nretry: ١٢\nid: a\0b\ndata: x\n\n".encode()
    (event,) = parse(body)
    assert event.retry is None and event.id == ""


def test_event_without_data_is_not_dispatched_but_a_nonstandard_error_field_is_kept() -> None:
    assert parse(b"event: ping\n\n") == []
    (event,) = parse(b'error: {"message": "model not loaded"}\n\n')
    assert event.data == "" and event.fields == {"error": '{"message": "model not loaded"}'}


def test_u2028_inside_json_is_data_not_a_line_end() -> None:
    body = 'data: {"t": "a\u2028b\u0085c"}\n\n'.encode()
    assert datas(parse(body)) == ['{"t": "a\u2028b\u0085c"}']


def test_missing_terminator_is_reported_as_truncation() -> None:
    events = parse(b"data: complete\n\ndata: partial")
    assert datas(events) == ["complete"]
    assert events[-1] == SSETruncated("", "", "data: partial")
    events = parse(b"event: x\ndata: half\n")
    assert events == [SSETruncated("half", "x", "")]


def test_one_byte_chunking_of_cjk_and_emoji_never_makes_replacement_characters() -> None:
    text = "日本語のテキスト 🎉 naïve"
    body = f"data: {text}\n\n".encode()
    assert datas(parse(body, list(range(len(body))))) == [text]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["data", "event", "id", ":", "retry", "error"]), st.text(max_size=12)), max_size=12
    ),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.lists(st.integers(0, 500), max_size=10),
)
def test_every_split_gives_the_same_events(lines: list[tuple[str, str]], eol: str, cuts: list[int]) -> None:
    text = ""
    for name, value in lines:
        value = value.replace("\r", "").replace("\n", "")
        text += (f":{value}" if name == ":" else f"{name}: {value}") + eol
        if len(text) % 3 == 0:
            text += eol
    body = text.encode()
    assert parse(body, cuts) == parse(body)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=8))
def test_any_bytes_any_split_same_events_and_no_exception(body: bytes, cuts: list[int]) -> None:
    assert parse(body, cuts) == parse(body)
