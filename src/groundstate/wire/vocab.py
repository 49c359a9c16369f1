"""Vocabularies: token ids to bytes and text to ids, and detokenisation that never splits a character.

A token may hold part of a UTF-8 character (byte-level BPE does this all the time); text is therefore
assembled from token *bytes* through an incremental UTF-8 decoder, which holds an incomplete character
back until its last byte arrives instead of emitting U+FFFD.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from .errors import EncodeError


class UnknownToken(EncodeError):
    """A token id the vocabulary does not have."""


class Vocabulary(Protocol):
    """What the wire needs of a tokenizer: its name (announced in HELLO), text to ids, an id to its bytes."""

    name: str  # announced in HELLO

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``."""

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` stands for (UnknownToken if it has none)."""


class ByteVocabulary:
    """Ids 0..255 are the bytes of UTF-8 text: usable with any provider that only gives text."""

    name = "bytes"

    def encode(self, text: str) -> list[int]:
        """One token per UTF-8 byte."""
        return list(text.encode("utf-8"))

    def token_bytes(self, token_id: int) -> bytes:
        """The byte itself (ids 0..255)."""
        if not 0 <= token_id < 256:
            raise UnknownToken(f"token {token_id} is not in the byte vocabulary (0..255)")
        return _BYTES[token_id]


_BYTES = [bytes((i,)) for i in range(256)]


@lru_cache(maxsize=1)
def _byte_level_alphabet() -> dict[str, int]:
    """The GPT-2 byte-level BPE alphabet: printable stand-ins for the 256 byte values."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class TokenizerVocabulary:
    """Any Hugging Face ``tokenizer.json``, through the ``tokenizers`` library.

    Token bytes are recovered exactly for byte-level BPE (GPT-2, Llama 3, SmolLM...) and for
    SentencePiece-style vocabularies (``▁`` for a space, ``<0xHH>`` byte fallback).
    """

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer

        raw = Path(path).read_bytes()
        self.tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
        self.name = "hf:" + hashlib.sha256(raw).hexdigest()[:16]
        spec: dict[str, Any] = json.loads(raw)
        self._byte_level = "ByteLevel" in json.dumps(spec.get("decoder") or spec.get("pre_tokenizer") or {})
        self._cache: dict[int, bytes] = {}

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` under the Hugging Face tokenizer, without special tokens."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token (byte-level tokens decoded to raw bytes)."""
        found = self._cache.get(token_id)
        if found is not None:
            return found
        piece = self.tokenizer.id_to_token(token_id)
        if piece is None:
            raise UnknownToken(f"token {token_id} is not in {self.name}")
        if self._byte_level:
            alphabet = _byte_level_alphabet()
            data = bytes(alphabet[ch] for ch in piece) if all(ch in alphabet for ch in piece) else piece.encode()
        else:
            match = _BYTE_FALLBACK.fullmatch(piece)
            data = bytes((int(match.group(1), 16),)) if match else piece.replace("\u2581", " ").encode("utf-8")
        self._cache[token_id] = data
        return data


class LlamaVocabulary:
    """A GGUF model's own vocabulary through llama-cpp-python (the ``local`` extra)."""

    def __init__(self, model_path: str | Path, model: Any = None) -> None:
        if model is None:
            from llama_cpp import Llama

            model = Llama(model_path=str(model_path), vocab_only=True, verbose=False)
        self.model = model
        self.name = f"gguf:{Path(model_path).name}:{self.model.n_vocab()}"

    @classmethod
    def from_model(cls, model: Any, model_path: str | Path) -> LlamaVocabulary:
        """The vocabulary of a model already loaded (no second load)."""
        return cls(model_path, model)

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` under the GGUF model's tokenizer, without special tokens."""
        return list(self.model.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token as llama.cpp detokenizes it."""
        if not 0 <= token_id < self.model.n_vocab():
            raise UnknownToken(f"token {token_id} is not in {self.name}")
        return bytes(self.model.detokenize([token_id]))


class Detokenizer:
    """Token ids in, text out; a character split across tokens is held back until complete."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, ids: Iterable[int]) -> str:
        """The text these ids complete (a split character waits for its remaining bytes)."""
        token_bytes = self.vocabulary.token_bytes
        return self._utf8.decode(b"".join(token_bytes(t) for t in ids))

    def close(self) -> str:
        """End of text: an incomplete character left over becomes U+FFFD here, and only here."""
        return self._utf8.decode(b"", final=True)


def vocabulary_from_spec(spec: str) -> Vocabulary:
    """``bytes``, a ``tokenizer.json`` path, or a ``.gguf`` model path."""
    if spec == "bytes":
        return ByteVocabulary()
    if spec.endswith(".gguf"):
        return LlamaVocabulary(spec)
    return TokenizerVocabulary(spec)
