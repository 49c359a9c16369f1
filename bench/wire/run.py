"""SIGIL against OpenAI chat-completion SSE: the same token stream, encoded and decoded, in one run.

    python bench/wire/run.py            # >= 1M tokens
    python bench/wire/run.py --quick    # a smoke test

The stream is realistic: prose, a thought, a tool call with JSON arguments and a code block, repeated
with variations, tokenised by a byte-level BPE tokenizer trained here (tokenizers library) and sent
with a hot table profiled from it. The SSE side carries one token per chunk, as providers do, and is
parsed the way clients do: the openai SDK's SSE decoder + json.loads, and httpx-sse + json.loads.

The first table's SIGIL rows are framed by the bench (a frame per part of the corpus). The second measures what the
gateway really publishes: the same content streamed as SSE, a token per event, parsed by the gateway's own adapter
and framed by its own bridge — a frame per event (``push``, as when every event arrives alone), a frame per read
of 16 KiB and of 1 KiB (``push_many``, what the gateway does with each read), and with the gateway's default hold
(``--publish-hold-ms``: a frame's text waits up to 5 ms for more), timed by the real clock as the bench reads a
backlog at full speed, and as a provider streaming 5,000 or 1,000 events a second would time it — decoded to text and
checked equal to what httpx-sse reads from the SSE.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from groundstate.providers import SigilBridge, provider_api
from groundstate.providers.gateway import PUBLISH_HOLD_SEC as HOLD
from groundstate.wire import ByteVocabulary, Content, Decoder, Encoder, Mode
from groundstate.wire.profile import hot_table

PROSE = (
    "The operator reviews the paused run and decides whether the agent may continue. "
    "Every action the kernel permits was derived from facts; nothing is guessed. "
)
THOUGHT = "The user wants the failing test fixed; first I should read the file and check the imports. "
TOOL_ARGS = '{"path": "src/app/handlers.py", "start_line": 120, "end_line": 180, "reason": "inspect handler"}'
CODE = "def handle(request):\n    payload = json.loads(request.body)\n    return Response(status=200, body=payload)\n"


def corpus(target_chars: int, seed: int = 3) -> list[tuple[Mode, str]]:
    rng = random.Random(seed)
    words = (PROSE + THOUGHT + CODE).split()
    parts: list[tuple[Mode, str]] = []
    size = 0
    while size < target_chars:
        noise = " ".join(rng.choice(words) for _ in range(rng.randint(5, 30)))
        for mode, text in (
            (Mode.TEXT, PROSE + noise + " "),
            (Mode.THINK, THOUGHT + noise),
            (Mode.TOOL_CALL, TOOL_ARGS.replace("120", str(rng.randint(1, 999)))),
            (Mode.CODE_BLOCK, CODE.replace("200", str(rng.choice([200, 201, 404])))),
        ):
            parts.append((mode, text))
            size += len(text)
    return parts


PACED_RATES = (5_000, 1_000)  # events a second: fast providers streaming a token per event (hosted models: 50-2,000)


def train_tokenizer(parts: list[tuple[Mode, str]]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=4096, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator((text for _, text in parts[:400]), trainer=trainer)
    return tokenizer


class _Vocab:
    name = "bench-bpe"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)


def sse_stream(parts: list[tuple[list[int], Mode]], piece_text: Callable[[int], str]) -> bytes:
    """Chat-completion chunks, one token each; thoughts as reasoning_content, tool calls as tool_calls."""
    out = []
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1763800000, "model": "bench-model"}
    for ids, mode in parts:
        for token in ids:
            text = piece_text(token)
            if mode == Mode.THINK:
                delta: dict[str, Any] = {"reasoning_content": text}
            elif mode == Mode.TOOL_CALL:
                delta = {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}
            else:
                delta = {"content": text}
            chunk = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])
            out.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def network_pieces(data: bytes, size: int = 16 * 1024) -> Iterator[bytes]:
    return (data[i : i + size] for i in range(0, len(data), size))


def decode_sigil(data: bytes) -> int:
    decoder = Decoder()
    count = 0
    for piece in network_pieces(data):
        for chunk in decoder.feed(piece):
            if isinstance(chunk, Content):
                count += len(chunk.tokens)
    return count


def decode_openai(data: bytes) -> int:
    from openai._streaming import SSEDecoder

    count = 0
    for event in SSEDecoder().iter_bytes(network_pieces(data)):
        if event.data != "[DONE]":
            json.loads(event.data)
            count += 1
    return count


def decode_httpx_sse(data: bytes) -> int:
    import httpx
    import httpx_sse

    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=network_pieces(data))
    count = 0
    for event in httpx_sse.EventSource(response).iter_sse():
        if event.data != "[DONE]":
            json.loads(event.data)
            count += 1
    return count


class PacedClock:
    """The time as a provider streaming ``rate`` events a second would make it: ``tick`` per event read."""

    def __init__(self, rate: float) -> None:
        self.now, self.step = 0.0, 1.0 / rate

    def __call__(self) -> float:
        return self.now

    def tick(self, events: int) -> None:
        self.now += events * self.step


def bridged(sse: bytes, read_size: int | None, hold: float = 0.0, rate: float | None = None) -> bytes:
    """What the gateway publishes for this stream: its own adapter parses each read of the upstream and its own
    bridge frames the events (the byte vocabulary, as the gateway uses for a provider's text). ``read_size``: the
    reads' size (``push_many``: a read's events framed together); None: every event in a read of its own (``push``).
    ``hold``: the bridge's hold (the gateway's ``--publish-hold-ms``), timed by the real clock as the bench frames
    the stream (a backlog read at full speed) or, with ``rate``, as a provider streaming that many events a second
    would time it."""
    adapter = provider_api("openai-chat").adapter("openai")
    paced = PacedClock(rate) if rate else None
    bridge = SigilBridge(ByteVocabulary(), hold=hold, clock=paced or time.monotonic)
    out = bytearray()
    if read_size is None:
        for piece in sse.split(b"\n\n"):  # each provider event in a read of its own
            if paced is not None:
                paced.tick(1)
            for event in adapter.feed(piece + b"\n\n"):
                out += bridge.push(event)
        for event in adapter.close():
            out += bridge.push(event)
    else:
        for piece in network_pieces(sse, read_size):
            out += bridge.push_many(adapter.feed(piece))
        out += bridge.push_many(adapter.close())
    return bytes(out + bridge.end())


def sigil_text(data: bytes) -> str:
    """The text and thoughts a subscriber reads from the bridge's frames (bytes joined, then decoded)."""
    decoder = Decoder()
    out = bytearray()
    for piece in network_pieces(data):
        for chunk in decoder.feed(piece):
            if isinstance(chunk, Content):
                out += bytes(chunk.tokens)
    return out.decode()


def sse_text(data: bytes) -> str:
    """The text and thoughts a client reads from the SSE stream with httpx-sse (json.loads per event)."""
    import httpx
    import httpx_sse

    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=network_pieces(data))
    out = []
    for event in httpx_sse.EventSource(response).iter_sse():
        if event.data != "[DONE]":
            delta = json.loads(event.data)["choices"][0]["delta"]
            out.append(delta.get("content") or delta.get("reasoning_content") or "")
    return "".join(out)


def frames_of(data: bytes) -> int:
    decoder = Decoder()
    return sum(1 for chunk in decoder.feed(data) if isinstance(chunk, Content))


def best_and_median(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    times = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def memcpy_bandwidth(size: int = 256 * 1024 * 1024) -> float:
    data = bytearray(size)
    start = time.perf_counter()
    for _ in range(4):
        bytes(data)
    return 4 * size / (time.perf_counter() - start)


def bridge_table(encoded_parts: list[tuple[list[int], Mode]], tokenizer: Any, repeat: int) -> None:
    """The framing the gateway's bridge really produces, on the same content as answer text and thoughts (its tool
    calls as text: the adapter frames a call whole, once, so it would not weigh on either side), in one run."""
    print()
    text_parts = [(ids, Mode.TEXT if mode == Mode.TOOL_CALL else mode) for ids, mode in encoded_parts]
    plain = sse_stream(text_parts, lambda t: tokenizer.decode([t]))
    events = sum(len(ids) for ids, _ in text_parts)
    expected = sse_text(plain)
    bridge_rows = []
    for name, fn, data in (
        ("SSE: httpx-sse + json.loads", sse_text, plain),
        (
            "SIGIL, the bridge at a frame per event (`push`: every event in a read of its own)",
            sigil_text,
            bridged(plain, None),
        ),
        (
            "SIGIL, the bridge framing each 16 KiB read (`push_many`: the gateway's)",
            sigil_text,
            bridged(plain, 16 * 1024),
        ),
        ("SIGIL, the bridge framing each 1 KiB read (`push_many`)", sigil_text, bridged(plain, 1024)),
        (
            f"SIGIL, the gateway's default: each 1 KiB read, held ≤ {HOLD * 1000:g} ms (a backlog at full speed)",
            sigil_text,
            bridged(plain, 1024, HOLD),
        ),
        (
            f"SIGIL, every event in a read of its own, held ≤ {HOLD * 1000:g} ms (a backlog at full speed)",
            sigil_text,
            bridged(plain, None, HOLD),
        ),
        *(
            (
                f"SIGIL, every event in a read of its own, held ≤ {HOLD * 1000:g} ms, {rate:,} events/s",
                sigil_text,
                bridged(plain, None, HOLD, rate),
            )
            for rate in PACED_RATES
        ),
    ):
        best, median, text = best_and_median(lambda fn=fn, data=data: fn(data), repeat)
        assert text == expected, f"{name} read other text than the SSE stream holds"
        bridge_rows.append((name, best, median, frames_of(data) if name.startswith("SIGIL") else events))
    print(f"The bridge's own framing: {events:,} provider events of one token each, {len(expected):,} characters.")
    print()
    print("| path | events/s (best) | median time | events per chunk | httpx-sse takes |")
    print("|---|---|---|---|---|")
    reference = bridge_rows[0][1]
    for name, best, median, chunks in bridge_rows:
        ratio = "" if name.startswith("SSE") else f"{reference / best:.1f}x as long"
        print(f"| {name} | {events / best:,.0f} | {median:.3f} s | {events / chunks:.1f} | {ratio} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    target = 60_000 if args.quick else 4_400_000
    parts = corpus(target)
    tokenizer = train_tokenizer(parts)
    vocab = _Vocab(tokenizer)
    encoded_parts = [(vocab.encode(text), mode) for mode, text in parts]
    tokens = sum(len(ids) for ids, _ in encoded_parts)
    profile = hot_table(vocab, (text for _, text in parts[:400]))

    def encode_sigil(frame_per_chunk: bool = True) -> bytes:
        encoder = Encoder(1, vocabulary=vocab.name, hot_table=profile["hot_table"], frame_per_chunk=frame_per_chunk)
        out = bytearray(encoder.hello())
        for ids, mode in encoded_parts:
            out += encoder.content(mode, ids)
            out += encoder.chunk_end()
        out += encoder.end()
        return bytes(out)

    enc_best, enc_median, sigil = best_and_median(encode_sigil, args.repeat)
    packed = encode_sigil(frame_per_chunk=False)
    sse = sse_stream(encoded_parts, lambda t: tokenizer.decode([t]))
    rows = []
    for name, fn, data in (
        ("SIGIL decode (a frame per chunk: live)", decode_sigil, sigil),
        ("SIGIL decode (64 KiB frames: recording)", decode_sigil, packed),
        ("SSE: openai SDK decoder + json.loads", decode_openai, sse),
        ("SSE: httpx-sse + json.loads", decode_httpx_sse, sse),
    ):
        best, median, count = best_and_median(lambda fn=fn, data=data: fn(data), args.repeat)
        assert count == tokens, f"{name} decoded {count} of {tokens} tokens"
        rows.append((name, best, median, len(data)))
    hot_encoder = Encoder(1)
    hot_run = hot_encoder.hello() + hot_encoder.text(bytes(range(127)) * 80_000) + hot_encoder.end()  # 10.2M tokens
    hot_best, _, hot_count = best_and_median(lambda: decode_sigil(hot_run), args.repeat)
    bandwidth = memcpy_bandwidth(64 * 1024 * 1024 if args.quick else 256 * 1024 * 1024)

    print(
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()};"
        f" {tokens:,} tokens; best / median of {args.repeat} runs."
    )
    print()
    print("| path | tokens/s (best) | median time | bytes/token | SIGIL (live framing) is |")
    print("|---|---|---|---|---|")
    sigil_best = rows[0][1]
    print(f"| SIGIL encode | {tokens / enc_best:,.0f} | {enc_median:.3f} s | {len(sigil) / tokens:.2f} | |")
    for name, best, median, size in rows:
        ratio = "" if name.startswith("SIGIL") else f"{best / sigil_best:.0f}x faster, {size / len(sigil):.0f}x smaller"
        print(f"| {name} | {tokens / best:,.0f} | {median:.3f} s | {size / tokens:.2f} | {ratio} |")
    print()
    bridge_table(encoded_parts, tokenizer, args.repeat)
    print(
        f"Long runs of hot tokens: {hot_count:,} tokens decoded at {hot_count / hot_best:,.0f} tokens/s"
        f" ({len(hot_run) / hot_best / 1e6:,.0f} MB/s); memory copy on this machine: {bandwidth / 1e6:,.0f} MB/s"
        f" ({bandwidth / (len(hot_run) / hot_best):.1f}x the hot-run decode rate)."
    )
    print(
        f"Realistic stream: SIGIL decodes {len(sigil) / sigil_best / 1e6:,.1f} MB/s,"
        f" {bandwidth / (len(sigil) / sigil_best):,.0f}x below memory-copy bandwidth."
    )


if __name__ == "__main__":
    sys.exit(main())
