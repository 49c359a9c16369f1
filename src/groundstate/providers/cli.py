"""``groundstate providers parse``: a recorded provider response as normalised events, one JSON object per line.

Written with click directly: this group is meant to start at once (docs/benchmarks.md, "Command-line start")."""

from __future__ import annotations

from pathlib import Path

import click

from .. import safejson
from .apis import APIS
from .conventions import TextConventions
from .errors import classify
from .normalized import ErrorEvent, Event, merge_deltas, to_json


@click.group(name="providers", no_args_is_help=True)
def app() -> None:
    """Provider streams: parse and inspect."""


@app.command()
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--api", required=True, help="openai-chat, openai-responses, anthropic or ollama.")
@click.option("--status", type=int, default=200, show_default=True, help="The HTTP status the body came with.")
@click.option("--headers", type=click.Path(path_type=Path), default=None, help="A JSON object of the response headers.")
@click.option("--think-tags", is_flag=True, help="The model writes reasoning as <think>...</think>.")
@click.option("--think-opened", is_flag=True, help="The chat template opened <think> already: only </think> appears.")
@click.option("--text-tools", default=None, help="The model writes tool calls as text: hermes or mistral.")
def parse(source: Path, api: str, status: int, headers: Path | None, think_tags: bool, think_opened: bool,
          text_tools: str | None) -> None:  # fmt: skip
    """Print the events of a recorded response (SOURCE: the body, an SSE stream or an error). Exit 0 even when it
    carries an error (the error is data)."""
    if api not in APIS:
        click.echo(f"error: --api must be one of {', '.join(APIS)}", err=True)
        raise click.exceptions.Exit(2)
    if text_tools not in (None, "hermes", "mistral"):
        click.echo("error: --text-tools must be hermes or mistral", err=True)
        raise click.exceptions.Exit(2)
    try:
        body = source.read_bytes()
        header_map = safejson.loads(headers.read_text(encoding="utf-8")) if headers else {}
        if not isinstance(header_map, dict):
            raise ValueError("--headers must hold a JSON object")
    except (OSError, ValueError) as exc:
        click.echo(f"error: cannot read the input: {exc}", err=True)
        raise click.exceptions.Exit(1) from None
    events: list[Event]
    if status >= 400:
        events = [ErrorEvent(classify(APIS[api].provider, status, body, header_map))]
    else:
        adapter = APIS[api].adapter(APIS[api].provider)
        conventions = TextConventions(think_tags=think_tags or think_opened, opening_tag_omitted=think_opened,
                                      text_tools=text_tools)  # fmt: skip
        events = conventions.feed(adapter.feed(body) + adapter.close()) + conventions.close()
    for event in merge_deltas(events):
        click.echo(safejson.dumps_line(to_json(event)))
