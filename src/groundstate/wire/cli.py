"""``groundstate wire``: encode, decode, dump, profile.

Written with click directly: this group is meant to start at once (the typer layer builds a pydantic adapter for
every parameter, about 60 ms before a command runs: docs/benchmarks.md, "Command-line start")."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .chunks import Reset
from .decoder import Decoder
from .dump import dump as dump_frames
from .encoder_input import EventError, MultiEncoder, parse_events, text_events
from .profile import hot_table
from .render import Renderer
from .vocab import ByteVocabulary, Vocabulary, vocabulary_from_spec


@click.group(name="wire", no_args_is_help=True)
def app() -> None:
    """SIGIL: the binary wire format for token streams."""


READ_SIZE = 64 * 1024


def _read(path: str) -> bytes:
    """The bytes of ``path`` (``-``: stdin); a file that cannot be read is an error naming it, not a traceback."""
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise _fail(f"cannot read {path}: {exc.strerror}") from None


def _fail(message: str) -> click.exceptions.Exit:
    click.echo(f"error: {message}", err=True)
    return click.exceptions.Exit(2)


def _vocabulary(spec: str) -> Vocabulary:
    try:
        return vocabulary_from_spec(spec)
    except (OSError, ValueError, ImportError) as exc:
        raise _fail(f"cannot load vocabulary {spec!r}: {exc}") from None


@app.command()
@click.argument("source")
@click.option(
    "--output", "-o", "output", type=click.Path(path_type=Path), required=True, help="The .sigil file to write."
)
@click.option("--jsonl", is_flag=True, help="Read JSON-lines events even without a .jsonl suffix.")
@click.option(
    "--vocab", default="bytes", show_default=True, help="bytes, a tokenizer.json path, or a .gguf model path."
)
@click.option(
    "--hot-table",
    "hot",
    type=click.Path(path_type=Path),
    default=None,
    help="A profile written by 'groundstate wire profile'.",
)
@click.option("--max-payload", type=int, default=None, help="Largest frame payload in bytes.")
def encode(source: str, output: Path, jsonl: bool, vocab: str, hot: Path | None, max_payload: int | None) -> None:
    """Encode events or text into SIGIL frames. SOURCE: JSON-lines events (.jsonl, or --jsonl) or plain text; -
    for stdin."""
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
    click.echo(f"wrote {len(out)} bytes to {output}", err=True)


@app.command()
@click.argument("source")
@click.option("--jsonl", is_flag=True, help="The inspection format: one JSON object per chunk.")
@click.option(
    "--vocab", default="bytes", show_default=True, help="Vocabulary for streams whose HELLO names no known one."
)
def decode(source: str, jsonl: bool, vocab: str) -> None:
    """Decode a SIGIL recording (SOURCE: a .sigil file; - for stdin). Exit 1 if any reset happened."""
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
        raise click.exceptions.Exit(1)


def _print(chunks: list[Any], jsonl: bool, renderer: Renderer) -> int:
    for chunk in chunks:
        click.echo(json.dumps(chunk.to_json()) if jsonl else renderer.line(chunk))
    return sum(isinstance(c, Reset) for c in chunks)


@app.command()
@click.argument("source")
def dump(source: str) -> None:
    """Annotated frame-level hex of SOURCE (a .sigil file; - for stdin)."""
    for line in dump_frames(_read(source)):
        click.echo(line)


@app.command()
@click.argument("corpus", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Path(path_type=Path),
    required=True,
    help="Where to write the hot-table profile (JSON).",
)
@click.option(
    "--vocab", default="bytes", show_default=True, help="bytes, a tokenizer.json path, or a .gguf model path."
)
def profile(corpus: tuple[Path, ...], output: Path, vocab: str) -> None:
    """Derive a hot table (the 127 most frequent tokens) from a CORPUS of UTF-8 text files."""
    vocabulary = _vocabulary(vocab)
    result = hot_table(vocabulary, (p.read_text(encoding="utf-8") for p in corpus))
    output.write_text(json.dumps(result) + "\n", encoding="utf-8")
    click.echo(f"profiled {result['tokens']} tokens of {len(corpus)} file(s) into {output}", err=True)


@app.command()
@click.option("--connect", required=True, help="ZMQ endpoint of the sender, e.g. tcp://127.0.0.1:5555.")
@click.option("--pattern", default="sub", show_default=True, help="sub (from a PUB sender) or pull (from PUSH).")
@click.option("--stream", type=int, multiple=True, help="Only these streams (sub only; repeatable).")
@click.option("--jsonl", is_flag=True, help="The inspection format.")
@click.option("--idle", type=float, default=None, help="Stop after this many seconds without a message.")
@click.option("--vocab", default="bytes", show_default=True, help="Vocabulary for text.")
def tail(connect: str, pattern: str, stream: tuple[int, ...], jsonl: bool, idle: float | None, vocab: str) -> None:
    """Decode a live SIGIL stream from ZeroMQ."""
    from .zmq_transport import FrameReceiver

    if pattern not in ("sub", "pull"):
        raise _fail("--pattern must be 'sub' or 'pull'")
    default = _vocabulary(vocab)
    renderer = Renderer(lambda name: default, default)
    receiver = FrameReceiver(connect, pattern, streams=list(stream) or None)
    try:
        for chunk in receiver.receive(None if idle is None else int(idle * 1000)):
            _print([chunk], jsonl, renderer)
    except KeyboardInterrupt:
        pass
    _print(receiver.close(), jsonl, renderer)
