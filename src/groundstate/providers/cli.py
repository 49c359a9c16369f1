"""``groundstate providers parse``: a recorded provider response as normalised events, one JSON object per line."""

from __future__ import annotations

from pathlib import Path

import typer

from .. import safejson
from .apis import APIS
from .conventions import TextConventions
from .errors import classify
from .normalized import ErrorEvent, Event, merge_deltas, to_json

app = typer.Typer(help="Provider streams: parse and inspect.", no_args_is_help=True)


@app.command()
def parse(
    source: Path = typer.Argument(..., help="A recorded response body (the SSE stream, or an error body)."),
    api: str = typer.Option(..., "--api", help="openai-chat, openai-responses, anthropic or ollama."),
    status: int = typer.Option(200, "--status", help="The HTTP status the body came with."),
    headers: Path | None = typer.Option(None, "--headers", help="A JSON object of the response headers."),
    think_tags: bool = typer.Option(False, "--think-tags", help="The model writes reasoning as <think>...</think>."),
    think_opened: bool = typer.Option(
        False, "--think-opened", help="The chat template opened <think> already: only </think> appears."
    ),
    text_tools: str | None = typer.Option(
        None, "--text-tools", help="The model writes tool calls as text: hermes or mistral."
    ),
) -> None:
    """Print the events of a recorded response. Exit 0 even when it carries an error (the error is data)."""
    if api not in APIS:
        typer.echo(f"error: --api must be one of {', '.join(APIS)}", err=True)
        raise typer.Exit(2)
    if text_tools not in (None, "hermes", "mistral"):
        typer.echo("error: --text-tools must be hermes or mistral", err=True)
        raise typer.Exit(2)
    try:
        body = source.read_bytes()
        header_map = safejson.loads(headers.read_text(encoding="utf-8")) if headers else {}
        if not isinstance(header_map, dict):
            raise ValueError("--headers must hold a JSON object")
    except (OSError, ValueError) as exc:
        typer.echo(f"error: cannot read the input: {exc}", err=True)
        raise typer.Exit(1) from None
    events: list[Event]
    if status >= 400:
        events = [ErrorEvent(classify(APIS[api].provider, status, body, header_map))]
    else:
        adapter = APIS[api].adapter(APIS[api].provider)
        conventions = TextConventions(think_tags=think_tags or think_opened, opening_tag_omitted=think_opened,
                                      text_tools=text_tools)  # fmt: skip
        events = conventions.feed(adapter.feed(body) + adapter.close()) + conventions.close()
    for event in merge_deltas(events):
        typer.echo(safejson.dumps_line(to_json(event)))
