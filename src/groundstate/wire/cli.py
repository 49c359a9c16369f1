"""``groundstate wire``: encode, decode, dump, profile."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from .chunks import Reset
from .decoder import Decoder
from .dump import dump as dump_frames
from .encoder_input import EventError, MultiEncoder, parse_events, text_events
from .profile import hot_table
from .render import Renderer
from .vocab import ByteVocabulary, Vocabulary, vocabulary_from_spec

app = typer.Typer(help="SIGIL: the binary wire format for token streams.", no_args_is_help=True)

READ_SIZE = 64 * 1024


def _read(path: str) -> bytes:
    """The bytes of ``path`` (``-``: stdin); a file that cannot be read is an error naming it, not a traceback."""
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise _fail(f"cannot read {path}: {exc.strerror}") from None


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _vocabulary(spec: str) -> Vocabulary:
    try:
        return vocabulary_from_spec(spec)
    except (OSError, ValueError, ImportError) as exc:
        raise _fail(f"cannot load vocabulary {spec!r}: {exc}") from None


@app.command()
def encode(
    source: str = typer.Argument(..., help="JSON-lines events (.jsonl, or --jsonl) or plain text; - for stdin."),
    output: Path = typer.Option(..., "--output", "-o", help="The .sigil file to write."),
    jsonl: bool = typer.Option(False, "--jsonl", help="Read JSON-lines events even without a .jsonl suffix."),
    vocab: str = typer.Option("bytes", "--vocab", help="bytes, a tokenizer.json path, or a .gguf model path."),
    hot: Path | None = typer.Option(None, "--hot-table", help="A profile written by 'groundstate wire profile'."),
    max_payload: int | None = typer.Option(None, "--max-payload", help="Largest frame payload in bytes."),
) -> None:
    """Encode events or text into SIGIL frames."""
    vocabulary = _vocabulary(vocab)
    table = None
    if hot is not None:
        profile = json.loads(hot.read_text(encoding="utf-8"))
        if profile.get("vocabulary") != vocabulary.name:
            raise _fail(f"the hot table was profiled for {profile.get('vocabulary')!r}, not {vocabulary.name!r}")
        table = profile["hot_table"]
    encoder = MultiEncoder(vocabulary, table, max_payload)
    text = _read(source).decode("utf-8")
    out = bytearray()
    try:
        if jsonl or source.endswith(".jsonl"):
            for _, event in parse_events(text.splitlines()):
                out += encoder.apply(event)
        else:
            for event in text_events(text):
                out += encoder.apply(event)
    except (EventError, ValueError) as exc:
        raise _fail(str(exc)) from None
    out += encoder.finish()
    output.write_bytes(bytes(out))
    typer.echo(f"wrote {len(out)} bytes to {output}", err=True)


@app.command()
def decode(
    source: str = typer.Argument(..., help="A .sigil file; - for stdin."),
    jsonl: bool = typer.Option(False, "--jsonl", help="The inspection format: one JSON object per chunk."),
    vocab: str = typer.Option("bytes", "--vocab", help="Vocabulary for streams whose HELLO names no known one."),
) -> None:
    """Decode a SIGIL recording. Exit 1 if any reset happened."""
    default = _vocabulary(vocab)
    known: dict[str, Vocabulary] = {default.name: default, "bytes": ByteVocabulary()}
    renderer = Renderer(lambda name: known.get(name, default), default)
    decoder = Decoder()
    data = _read(source)
    resets = 0
    for start in range(0, max(len(data), 1), READ_SIZE):
        resets += _print(decoder.feed(data[start : start + READ_SIZE]), jsonl, renderer)
    resets += _print(decoder.close(), jsonl, renderer)
    if resets:
        raise typer.Exit(1)


def _print(chunks: list[Any], jsonl: bool, renderer: Renderer) -> int:
    for chunk in chunks:
        typer.echo(json.dumps(chunk.to_json()) if jsonl else renderer.line(chunk))
    return sum(isinstance(c, Reset) for c in chunks)


@app.command()
def dump(source: str = typer.Argument(..., help="A .sigil file; - for stdin.")) -> None:
    """Annotated frame-level hex."""
    for line in dump_frames(_read(source)):
        typer.echo(line)


@app.command()
def profile(
    corpus: list[Path] = typer.Argument(..., exists=True, dir_okay=False, help="UTF-8 text files."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the hot-table profile (JSON)."),
    vocab: str = typer.Option("bytes", "--vocab", help="bytes, a tokenizer.json path, or a .gguf model path."),
) -> None:
    """Derive a hot table (the 127 most frequent tokens) from a corpus."""
    vocabulary = _vocabulary(vocab)
    result = hot_table(vocabulary, (p.read_text(encoding="utf-8") for p in corpus))
    output.write_text(json.dumps(result) + "\n", encoding="utf-8")
    typer.echo(f"profiled {result['tokens']} tokens of {len(corpus)} file(s) into {output}", err=True)


@app.command()
def tail(
    connect: str = typer.Option(..., "--connect", help="ZMQ endpoint of the sender, e.g. tcp://127.0.0.1:5555."),
    pattern: str = typer.Option("sub", "--pattern", help="sub (from a PUB sender) or pull (from PUSH)."),
    stream: list[int] = typer.Option([], "--stream", help="Only these streams (sub only; repeatable)."),
    jsonl: bool = typer.Option(False, "--jsonl", help="The inspection format."),
    idle: float | None = typer.Option(None, "--idle", help="Stop after this many seconds without a message."),
    vocab: str = typer.Option("bytes", "--vocab", help="Vocabulary for text."),
) -> None:
    """Decode a live SIGIL stream from ZeroMQ."""
    from .zmq_transport import FrameReceiver

    if pattern not in ("sub", "pull"):
        raise _fail("--pattern must be 'sub' or 'pull'")
    default = _vocabulary(vocab)
    renderer = Renderer(lambda name: default, default)
    receiver = FrameReceiver(connect, pattern, streams=stream or None)
    try:
        for chunk in receiver.receive(None if idle is None else int(idle * 1000)):
            _print([chunk], jsonl, renderer)
    except KeyboardInterrupt:
        pass
    _print(receiver.close(), jsonl, renderer)
