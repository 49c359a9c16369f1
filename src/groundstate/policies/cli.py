"""``groundstate policy test``: run policy test files, print each failure with what was derived instead, and — with
``--coverage`` — every rule of the policy with the number of cases that fired it, and the rules no case reaches.
``groundstate policy replay``: the MCP guard's recorded decisions re-decided under a candidate policy."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import typer

from ..config import CONFIG_OPTION, DB_OPTION, default_db_url, home, load_config
from ..errors import GroundstateError, exit_code
from ..terminal_text import terminal_safe
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


@app.command("replay")
def replay(
    policy: list[Path] = typer.Option(..., "--policy", help="A candidate's rule file (repeat for several): decided "
                                      "with the shipped policy, in place of [mcp] policy."),
    since: str | None = typer.Option(None, "--since", help="Only decisions at or after this time (ISO 8601: "
                                     "2026-11-20, 2026-11-20T12:00Z; UTC unless it says)."),
    server: str | None = typer.Option(None, "--server", help="Only calls to this upstream server."),
    run: list[str] = typer.Option([], "--run", help="Re-decide this run's checkpoints instead (repeat for several): "
                                  "the candidate's files are guard rules, in place of [policy] guards."),
    runs: bool = typer.Option(False, "--runs", help="Re-decide every run's checkpoints (--since: runs created then "
                              "or after) instead of the MCP guard's calls."),
    as_json: bool = typer.Option(False, "--json", help="The flips and the summary as one JSON object."),
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Re-decide every call the MCP guard recorded under the shipped policy and the candidate's files, from the facts
    it was decided from — or, with --run or --runs, every checkpoint of runs from what their guards were told — and
    print each decision that would flip with the candidate's derivation, then a summary per flip and reason. Exit 0
    (flips are findings, not failures); 2 if the candidate or the store cannot be used."""
    from ..guard import Ledger
    from .replay import replay_mcp

    try:
        moment = datetime.fromisoformat(since) if since is not None else None
    except ValueError:
        raise typer.BadParameter(f"{since!r} is not an ISO 8601 time", param_hint="--since") from None
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if run or runs:
        if server is not None:
            raise typer.BadParameter("--server selects the MCP guard's calls; runs have no server",
                                     param_hint="--server")  # fmt: skip
        _replay_runs(policy, run, moment, as_json, db, config)
        return
    try:
        store = db or load_config(config).config.store.url or default_db_url(home())
        found = replay_mcp(Ledger(store), policy, moment, server)
    except GroundstateError as exc:
        raise typer.Exit(_refused(exc)) from None
    if as_json:
        typer.echo(json.dumps({
            "replayed": found.replayed,
            "flips": [{"entry": f.recorded.id, "at": f.recorded.at.isoformat(), "server": f.recorded.server,
                       "tool": f.recorded.tool, "from": f.recorded.decision, "to": f.decision, "reasons": f.reasons,
                       "why": f.why, "recorded_reasons": f.recorded.reasons, "recorded_why": f.recorded.why}
                      for f in found.flips],
            "summary": [{"from": made, "to": would, "reason": reason, "calls": count}
                        for (made, would, reason), count in found.summary().most_common()],
            "unreadable": [{"entry": entry, "why": why} for entry, why in found.unreadable],
        }, ensure_ascii=False, indent=1))  # fmt: skip
        raise typer.Exit(0)
    for flip in found.flips:
        was = flip.recorded
        typer.echo(one_line(f"entry {was.id} ({was.at:%Y-%m-%d %H:%M:%S}) {was.server}/{was.tool}: {was.decision} "
                            f"-> {flip.decision}: {flip.reasons[0]}"))  # fmt: skip
        typer.echo("".join(f"    {line}\n" for line in flip.why.splitlines()) + f"    was: {one_line(was.reasons[0])}")
    _summary(found.summary(), f"{found.replayed} decisions replayed, {len(found.flips)} would flip",
             [(f"entry {entry}", why) for entry, why in found.unreadable], "could not be re-decided")  # fmt: skip


def _replay_runs(policy: list[Path], chosen: list[str], since: datetime | None, as_json: bool, db: str | None,
                 config: Path | None) -> None:  # fmt: skip
    """``policy replay --run/--runs``: the runs' recorded checkpoints under the candidate's guard rules."""
    from ..runtime import StoreCorrupt, configured_runtime, guard_rule_parts, replay_runs
    from ..store import aware

    try:
        runtime = configured_runtime(db, config)
        rules = guard_rule_parts(policy, runtime.settings.policy.disable_guards)
        ids = chosen or [row["id"] for row in reversed(runtime.store.runs())  # an unreadable row has no date: kept
                         if since is None or row["created_at"] is None or aware(row["created_at"]) >= since]
        for run_id in chosen:
            with contextlib.suppress(StoreCorrupt):  # its replay says it cannot be read; the others go on
                runtime.store.state(run_id)  # UnknownRun names a run that is not in the store
        found = replay_runs(runtime.store, ids, rules)
    except GroundstateError as exc:
        raise typer.Exit(_refused(exc)) from None
    if as_json:
        typer.echo(json.dumps({
            "replayed": found.replayed,
            "flips": [{"run": f.run_id, "report": f.report, "after_event": f.after_seq, "agent": f.agent,
                       "checkpoint": f.checkpoint, "from": f.recorded[0], "recorded_reason": f.recorded[1],
                       "to": f.candidate[0], "reason": f.candidate[1], "why": f.why} for f in found.flips],
            "summary": [{"from": made, "to": would, "reason": reason, "checkpoints": count}
                        for (made, would, reason), count in found.summary().most_common()],
            "unreadable": [{"run": run_id, "why": why} for run_id, why in found.unreadable],
        }, ensure_ascii=False, indent=1))  # fmt: skip
        return
    for flip in found.flips:
        said = f": {flip.candidate[1]}" if flip.candidate[1] else ""
        typer.echo(one_line(f"{flip.run_id} {flip.agent} {flip.checkpoint} (report {flip.report}, after event "
                            f"{flip.after_seq}): {flip.recorded[0]} -> {flip.candidate[0]}{said}"))  # fmt: skip
        was = f"{flip.recorded[0]}: {flip.recorded[1]}" if flip.recorded[1] else flip.recorded[0]
        typer.echo("".join(f"    {line}\n" for line in flip.why.splitlines()) + f"    was: {one_line(was)}")
    _summary(found.summary(), f"{found.replayed} checkpoints replayed, {len(found.flips)} would flip",
             list(found.unreadable), "runs could not be re-decided")  # fmt: skip


def one_line(text: str) -> str:
    """A replay's line as one line: a reason (a model's native call named with a line break) forged a ``FLIP``
    line and a summary line of its own (found by an attack)."""
    return terminal_safe(text, one_line=True)


def _refused(exc: GroundstateError) -> int:
    """A replay that cannot start (the candidate, the store, a run): one line, and exit 2 (1 means a verdict)."""
    typer.echo(f"error: {exc}", err=True)
    return exit_code(exc) if exit_code(exc) != 1 else 2


def _summary(flips: Counter[tuple[str, str, str]], totals: str, unreadable: list[tuple[str, str]],
             unread: str) -> None:  # fmt: skip
    """A replay's ending, for the guard's calls and runs alike: the flips by reason, the totals, what could not be
    re-decided (the first ten, each with why)."""
    if flips:
        typer.echo("flips by reason:")
        for (made, would, reason), count in flips.most_common():
            typer.echo(one_line(f"  {count}  {made} -> {would}: {reason}"))
    typer.echo(totals + (f"; {len(unreadable)} {unread}" if unreadable else ""))
    for where, why in unreadable[:10]:
        typer.echo(one_line(f"  {where}: {why}"))


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
