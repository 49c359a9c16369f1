"""``groundstate logic check`` and ``groundstate logic run``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer

from .engine import Engine
from .errors import LogicError
from .jsonvalues import to_json
from .program import Program
from .values import display_fact

app = typer.Typer(help="The Mangle-dialect logic engine.", no_args_is_help=True)

FilesArg = typer.Argument(..., exists=True, dir_okay=False, readable=True, help="Mangle source files (.mg).")


def _report(error: LogicError) -> None:
    for diagnostic in error.diagnostics:
        typer.echo(diagnostic.format(), err=True)


def _load(files: list[Path]) -> Program:
    return Program.load(*files)


@app.command()
def check(
    files: list[Path] = FilesArg,
    check_bounds: bool = typer.Option(
        True, "--check-bounds/--no-check-bounds", help="Check facts against Decl bounds."
    ),
) -> None:
    """Static analysis only: syntax, declarations, safety, stratification. Exit 1 on any error."""
    try:
        program = _load(files)
        analyzed = program.analyze(check_bounds)
    except LogicError as error:
        _report(error)
        raise typer.Exit(1) from None
    facts = sum(len(f) for f in analyzed.facts.values())
    typer.echo(
        f"ok: {len(files)} file(s), {len(analyzed.predicates)} predicates, {len(analyzed.rules)} rules,"
        f" {facts} facts, {len(analyzed.strata)} strata",
        err=True,
    )


@app.command()
def run(
    files: list[Path] = FilesArg,
    query: list[str] = typer.Option(
        [], "--query", "-q", help="Print only facts matching this atom, e.g. 'path(/a, X)'."
    ),
    output_format: str = typer.Option(
        "mangle", "--format", "-f", help="mangle (canonical display) or json (JSON lines)."
    ),
    stats: bool = typer.Option(False, "--stats", help="Facts per predicate, iterations and time on stderr."),
    created_fact_limit: int | None = typer.Option(
        None, "--created-fact-limit", help="Abort after creating this many facts."
    ),
    check_bounds: bool = typer.Option(
        True, "--check-bounds/--no-check-bounds", help="Check facts against Decl bounds."
    ),
) -> None:
    """Evaluate the program and print its facts, one per line, sorted."""
    if output_format not in ("mangle", "json"):
        typer.echo(f"error: --format must be 'mangle' or 'json', not {output_format!r}", err=True)
        raise typer.Exit(2)
    try:
        started = time.perf_counter()
        program = _load(files)
        parsed = time.perf_counter()
        engine = Engine(program, created_fact_limit=created_fact_limit, check_bounds=check_bounds)
        result = engine.evaluate()
        if query:
            selected = [(q, engine.query(q)) for q in query]
            groups = [(_predicate_of(q), facts) for q, facts in selected]
        else:
            groups = list(engine.all_facts().items())
    except LogicError as error:
        _report(error)
        raise typer.Exit(1) from None
    out = sys.stdout
    for predicate, facts in groups:
        for fact in facts:
            if output_format == "json":
                out.write(json.dumps({"predicate": predicate, "args": [to_json(v) for v in fact]}) + "\n")
            else:
                out.write(display_fact(predicate, fact) + "\n")
    out.flush()
    if stats:
        err = sys.stderr
        err.write(
            f"parse: {parsed - started:.4f}s, evaluate: {result.seconds:.4f}s, iterations: {result.iterations},"
            f" facts created: {result.created}\n"
        )
        for predicate, count in result.facts.items():
            err.write(f"  {predicate}: {count}\n")


def _predicate_of(query: str) -> str:
    from .parser import parse_atom

    return parse_atom(query).predicate
