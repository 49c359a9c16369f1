"""``groundstate policy test``: run policy test files, print each failure with what was derived instead, and — with
``--coverage`` — every rule of the policy with the number of cases that fired it, and the rules no case reaches."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import GroundstateError
from .cases import load_case_file
from .mcp_cases import CaseResult, Coverage, run_mcp_cases

app = typer.Typer(help="Policies: test your rules before they decide.", no_args_is_help=True)


@app.command("test")
def test(
    paths: list[Path] = typer.Argument(..., help="Test files (*.toml), or directories holding *_test.toml files."),
    coverage: bool = typer.Option(False, "--coverage", help="Every rule, how many cases fired it, the unreached."),
    as_json: bool = typer.Option(False, "--json", help="The results (and coverage) as one JSON object."),
) -> None:
    """Run each case against the shipped policy plus the file's rules, loaded as `mcp serve` (decider "mcp") or `run`
    (decider "runtime") loads them; exit 1 on any failure."""
    files = [found for path in paths for found in (sorted(path.glob("*_test.toml")) if path.is_dir() else [path])]
    if not files:
        typer.echo(f"error: no *_test.toml file in {', '.join(map(str, paths))}", err=True)
        raise typer.Exit(2)
    counted = Coverage() if coverage else None
    results: list[tuple[Path, CaseResult]] = []
    try:
        for file in files:
            cases = load_case_file(file)
            if cases.decider == "runtime":
                from .runtime_cases import run_runtime_cases

                results += [(file, result) for result in run_runtime_cases(cases, counted)]
            else:
                results += [(file, result) for result in run_mcp_cases(cases, counted)]
    except GroundstateError as exc:  # a test file or a rule file that cannot be used: no case ran (failures: 1)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    failed = [(file, result) for file, result in results if not result.passed]
    if as_json:
        typer.echo(json.dumps(_json(results, counted), ensure_ascii=False, indent=1))
    else:
        for file, result in failed:
            typer.echo(_failure(file, result))
        if counted is not None:
            typer.echo(_table(counted))
        typer.echo(f"{len(results) - len(failed)} passed, {len(failed)} failed ({len(files)} file(s))")
    raise typer.Exit(1 if failed else 0)


def _failure(file: Path, result: CaseResult) -> str:
    case = result.case
    wanted = case.expect + (f" with reasons {case.reasons}" if case.reasons is not None else "")
    lines = [f"{file}:{case.line}: case {case.name!r}: expected {wanted}, got {result.decision} "
             f"({'; '.join(result.reasons)})"]  # fmt: skip
    lines += [f"    {line}" for line in result.why.splitlines()]
    return "\n".join(lines)


def _table(coverage: Coverage) -> str:
    rows = [f"{Path(source).name}:{line}  {predicate}  {coverage.fired[(source, line)]}"
            for (source, line), predicate in sorted(coverage.rules.items())]  # fmt: skip
    unreached = [f"{Path(source).name}:{line}" for source, line in coverage.unreached()]
    reached = len(coverage.rules) - len(unreached)
    summary = f"coverage: {reached} of {len(coverage.rules)} rules fired"
    return "\n".join(["rule  head  cases", *rows, summary + (f"; never: {', '.join(unreached)}" if unreached else "")])


def _json(results: list[tuple[Path, CaseResult]], coverage: Coverage | None) -> dict[str, object]:
    out: dict[str, object] = {
        "passed": sum(result.passed for _, result in results),
        "failed": [{"file": str(file), "line": r.case.line, "case": r.case.name, "expected": r.case.expect,
                    "got": r.decision, "reasons": r.reasons, "why": r.why}
                   for file, r in results if not r.passed],
    }  # fmt: skip
    if coverage is not None:
        out["coverage"] = [{"file": Path(source).name, "line": line, "head": predicate,
                            "cases": coverage.fired[(source, line)]}
                           for (source, line), predicate in sorted(coverage.rules.items())]  # fmt: skip
        out["unreached"] = [f"{Path(source).name}:{line}" for source, line in coverage.unreached()]
    return out
