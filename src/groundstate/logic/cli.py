"""``groundstate logic check`` and ``groundstate logic run``.

Written with click directly: this group is meant to start at once (docs/benchmarks.md, "Command-line start")."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from .engine import Engine
from .errors import LogicError
from .jsonvalues import to_json
from .program import Program
from .values import display_fact


@click.group(name="logic", no_args_is_help=True)
def app() -> None:
    """The Mangle-dialect logic engine."""


files_argument = click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)
)
check_bounds_option = click.option("--check-bounds/--no-check-bounds", default=True, show_default=True,
                                   help="Check facts against Decl bounds.")  # fmt: skip


# The shipped policies a user's rule files are loaded with (``check --policy``), by the package that ships them:
# resources named, never imported (this group starts without the rest of groundstate).
SHIPPED = {
    "mcp": [("groundstate.guard", "mcp.mg"), ("groundstate.provenance", "flows.mg"),
            ("groundstate.provenance", "writes.mg")],  # mcp serve's [mcp] policy
    "gateway": [("groundstate.guard", "replies.mg")],  # gateway --gate's [gateway] rules
    "runtime": [("groundstate.runtime", "guards.mg"),
                ("groundstate.provenance", "flows.mg"), ("groundstate.provenance", "writes.mg")],  # a run's guards
    "kernel": [("groundstate.kernel", "schemas.mg"), ("groundstate.kernel", "routes.mg"),
               ("groundstate.kernel", "policy.mg")],  # an agent kernel's [policy] kernel
}  # fmt: skip
policy_option = click.option("--policy", "policy", type=click.Choice(sorted(SHIPPED)), default=None,
                             help="Check FILES with this shipped policy, as groundstate loads them together; each "
                                  "of your rules that adds to one of its predicates is listed with what that "
                                  "predicate does.")  # fmt: skip


def _shipped(policy: str | None) -> list[Path]:
    from importlib import resources

    return [Path(str(resources.files(package) / "defaults" / name)) for package, name in SHIPPED.get(policy or "", [])]


def _report(error: LogicError) -> None:
    for diagnostic in error.diagnostics:
        click.echo(diagnostic.format(), err=True)


def _load(files: tuple[Path, ...]) -> Program:
    return Program.load(*files)


@app.command()
@files_argument
@check_bounds_option
@policy_option
def check(files: tuple[Path, ...], check_bounds: bool, policy: str | None) -> None:
    """Static analysis only of Mangle source FILES: syntax, declarations, safety, stratification. Exit 1 on any
    error. With --policy, FILES are your rules and the shipped policy is loaded with them."""
    shipped = _shipped(policy)
    try:
        program = _load((*shipped, *files))
        analyzed = program.analyze(check_bounds)
    except LogicError as error:
        _report(error)
        if policy is None:
            _hint(error)
        raise click.exceptions.Exit(1) from None
    for line in _extensions(program, len(shipped)):
        click.echo(line)
    facts = sum(len(f) for f in analyzed.facts.values())
    click.echo(
        f"ok: {len(files)} file(s)" + (f" with the shipped {policy} policy" if policy else "") +
        f", {len(analyzed.predicates)} predicates, {len(analyzed.rules)} rules, {facts} facts,"
        f" {len(analyzed.strata)} strata",
        err=True,
    )


@app.command()
@files_argument
@policy_option
def lint(files: tuple[Path, ...], policy: str | None) -> None:
    """The mistakes people make in Datalog, in your rule FILES (read with the shipped --policy they join): singleton
    variables, declarations nothing uses or derives, rules that can never fire, repeated rules, rules that repeat or
    break a shipped one. Each finding with file:line:col; exit 1 on any error (after the analysis errors of check)."""
    from .lint import ERROR, lint_units

    shipped = _shipped(policy)
    try:
        program = _load((*shipped, *files))
        program.analyze(True)
    except LogicError as error:
        _report(error)
        if policy is None:
            _hint(error)
        raise click.exceptions.Exit(1) from None
    findings = lint_units(program.units, len(shipped))
    for finding in findings:
        click.echo(str(finding))
    errors = sum(1 for finding in findings if finding.level == ERROR)
    click.echo(f"{errors} error(s), {len(findings) - errors} warning(s)", err=True)
    raise click.exceptions.Exit(1 if errors else 0)


def _hint(error: LogicError) -> None:
    """Predicates the files use and do not declare, that a shipped policy declares: say which --policy loads it."""
    import re

    missing = {m.group(1) for d in error.diagnostics for m in re.finditer(r"could not find predicate (\w+)/", str(d))}
    for name in sorted(SHIPPED):
        try:
            declared = {decl.atom.predicate for unit in _load(tuple(_shipped(name))).units for decl in unit.decls}
        except LogicError:
            continue
        found = sorted(missing & declared)
        if found:
            click.echo(f"hint: {', '.join(found)} {'is' if len(found) == 1 else 'are'} declared by the shipped "
                       f"{name} policy: check your rules with it (--policy {name})", err=True)  # fmt: skip
            return


def _extensions(program: Program, shipped: int) -> list[str]:
    """Each rule of the user's files that adds to a predicate the shipped files declare: where it is, and what that
    predicate does there (its ``doc``: the precedence of the extension points is written in them)."""
    docs: dict[str, str] = {}
    for unit in program.units[:shipped]:
        for decl in unit.decls:
            doc = decl.descriptor("doc")
            docs[decl.atom.predicate] = " ".join(str(arg).strip('"') for arg in doc.args) if doc else ""
    return [f"{clause.pos.source}:{clause.pos.line}:{clause.pos.column}: {clause.head.predicate}: "
            f"{docs[clause.head.predicate]}"
            for unit in program.units[shipped:] for clause in unit.clauses
            if clause.head.predicate in docs]  # fmt: skip


@app.command()
@files_argument
@click.option("--query", "-q", "query", multiple=True, help="Print only facts matching this atom, e.g. 'path(/a, X)'.")
@click.option(
    "--format",
    "-f",
    "output_format",
    default="mangle",
    show_default=True,
    help="mangle (canonical display) or json (JSON lines).",
)
@click.option("--stats", is_flag=True, help="Facts per predicate, iterations and time on stderr.")
@click.option("--created-fact-limit", type=int, default=None, help="Abort after creating this many facts.")
@check_bounds_option
def run(files: tuple[Path, ...], query: tuple[str, ...], output_format: str, stats: bool,
        created_fact_limit: int | None, check_bounds: bool) -> None:  # fmt: skip
    """Evaluate the program in FILES and print its facts, one per line, sorted."""
    if output_format not in ("mangle", "json"):
        click.echo(f"error: --format must be 'mangle' or 'json', not {output_format!r}", err=True)
        raise click.exceptions.Exit(2)
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
        raise click.exceptions.Exit(1) from None
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
