"""Vocabularies, detokenisation across split characters, hot-table profiles, JSON-lines events."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.wire import ByteVocabulary, Content, Decoder, Detokenizer, TokenizerVocabulary, UnknownToken
from groundstate.wire.encoder_input import EventError, MultiEncoder, parse_events
from groundstate.wire.profile import hot_table

CORPUS = (
    "The model proposes, logic decides. Naïve café owners 🎉 write déjà-vu notes; "
    '日本語のテキストも少し。 Tool calls carry JSON: {"path": "/tmp/x", "mode": 420}. ' * 20
)


@pytest.fixture(scope="module")
def hf_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real byte-level BPE tokenizer, trained here with the tokenizers library."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([CORPUS], trainer=trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


@settings(max_examples=200)
@given(st.text(max_size=60), st.lists(st.integers(1, 7), max_size=20))
def test_byte_vocabulary_detokenises_any_split_without_replacement_characters(text: str, sizes: list[int]) -> None:
    vocabulary = ByteVocabulary()
    ids = vocabulary.encode(text)
    detok = Detokenizer(vocabulary)
    out, i = [], 0
    for size in sizes:
        piece = detok.feed(ids[i : i + size])
        assert "\ufffd" not in piece or "\ufffd" in text
        out.append(piece)
        i += size
    out.append(detok.feed(ids[i:]))
    out.append(detok.close())
    assert "".join(out) == text


def test_an_unfinished_character_becomes_a_replacement_only_at_the_end() -> None:
    detok = Detokenizer(ByteVocabulary())
    assert detok.feed([0xE2, 0x80]) == ""
    assert detok.close() == "\ufffd"
    with pytest.raises(UnknownToken):
        ByteVocabulary().token_bytes(256)


def test_hf_tokenizer_roundtrip_through_sigil(hf_tokenizer: Path) -> None:
    vocabulary = TokenizerVocabulary(hf_tokenizer)
    assert vocabulary.name.startswith("hf:")
    text = 'Naïve café 🎉 日本語 {"path": "/tmp/x"}'
    ids = vocabulary.encode(text)
    assert any(not _is_utf8(vocabulary.token_bytes(t)) for t in ids)  # some token holds part of a character
    encoder = MultiEncoder(vocabulary)
    data = encoder.apply({"event": "text", "tokens": ids}) + encoder.finish()
    decoder = Decoder()
    chunks = decoder.feed(data) + decoder.close()
    tokens = [t for c in chunks if isinstance(c, Content) for t in c.tokens]
    assert tokens == ids
    detok = Detokenizer(vocabulary)
    pieces = [detok.feed([t]) for t in tokens] + [detok.close()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_hot_table_profile_puts_the_most_frequent_tokens_first() -> None:
    profile = hot_table(ByteVocabulary(), ["aaab", "ab"])
    assert profile["vocabulary"] == "bytes" and profile["tokens"] == 6
    assert profile["hot_table"][:2] == [ord("a"), ord("b")]
    assert len(profile["hot_table"]) == 127 and len(set(profile["hot_table"])) == 127


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 1: not JSON"),
        ("[1]", 'expected an object with an "event" field'),
        ('{"event": "dance"}', "unknown event 'dance'"),
        ('{"event": "text"}', 'needs "text"'),
        ('{"event": "text", "tokens": [-1]}', 'needs "text"'),
        ('{"event": "upstream_error"}', 'needs an "error" object'),
        ('{"event": "flush", "stream": "x"}', "stream must be an integer"),
    ],
)
def test_bad_event_lines_are_named(line: str, message: str) -> None:
    with pytest.raises(EventError, match=message):
        list(parse_events([line]))
