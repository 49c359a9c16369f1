"""How long the command line takes to start: each command group's help and a small real command, against the
interpreter's own start (`python -c pass`) and the CLI framework's floor (`python -c "import typer"`), each a fresh
process, alternating in one run.

    python bench/cli/run.py            # 15 rounds
    python bench/cli/run.py --quick    # 3 rounds, a smoke test

Every command's exit status and output are checked (a command that fails or prints the wrong thing fails the
benchmark), so a fast wrong answer cannot count.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable


def commands(workdir: Path) -> list[tuple[str, list[str], str]]:
    """(label, argv, a text the output must contain) — the peers first."""
    text = workdir / "hello.txt"
    text.write_text("Hello from a short SIGIL recording.\n")
    recording = workdir / "hello.sigil"
    subprocess.run([PY, "-m", "groundstate", "wire", "encode", str(text), "-o", str(recording)], check=True,
                   capture_output=True)  # fmt: skip
    program = workdir / "path.mg"
    program.write_text("edge(1, 2). edge(2, 3).\npath(X, Y) :- edge(X, Y).\npath(X, Z) :- edge(X, Y), path(Y, Z).\n")
    minimal = workdir / "minimal.py"  # the smallest typer program with a command that takes a file: typer's own cost
    minimal.write_text("from pathlib import Path\nimport typer\napp = typer.Typer(add_completion=False)\n"
                       "@app.command()\ndef decode(file: Path, jsonl: bool = False) -> None:\n    print(file.name)\n"
                       "@app.callback()\ndef main() -> None:\n    pass\napp()\n")  # fmt: skip
    gs = [PY, "-m", "groundstate"]
    return [
        ("python -c pass", [PY, "-c", "pass"], ""),
        ("python -c 'import typer' (the floor)", [PY, "-c", "import typer"], ""),
        ("a minimal typer app: one command, one file argument", [PY, str(minimal), "decode", str(recording)],
         "hello.sigil"),
        ("groundstate --help", [*gs, "--help"], "Commands"),
        ("groundstate sigil --help", [*gs, "sigil", "--help"], "decode"),
        (f"groundstate sigil decode ({recording.stat().st_size}-byte file)", [*gs, "sigil", "decode", str(recording)],
         "Hello from a short"),
        ("groundstate logic --help", [*gs, "logic", "--help"], "check"),
        ("groundstate logic run (3 facts, a recursive rule)", [*gs, "logic", "run", str(program)], "path(1, 3)"),
        ("groundstate packets --help", [*gs, "packets", "--help"], "schema"),
        ("groundstate providers --help", [*gs, "providers", "--help"], "inspect"),
        ("groundstate runs --help (the runtime: not a target)", [*gs, "runs", "--help"], "decide"),
    ]  # fmt: skip


def once(argv: list[str], expect: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "COLUMNS": "100"})
    seconds = time.perf_counter() - start
    if done.returncode not in (0,) or expect not in done.stdout:
        raise SystemExit(
            f"{' '.join(argv)}: exit {done.returncode}, expected {expect!r} in:\n{done.stdout}{done.stderr}"
        )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        rows = commands(Path(tmp))
        times: dict[str, list[float]] = {label: [] for label, _, _ in rows}
        for argv in (argv for _, argv, _ in rows):  # warm the file cache once
            subprocess.run(argv, capture_output=True)
        for _ in range(rounds):  # alternate: every command in every round
            for label, argv, expect in rows:
                times[label].append(once(argv, expect))
    floor = statistics.median(times[rows[1][0]])
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; {rounds} rounds\n")
    print("| command | best ms | median ms | median / typer floor |")
    print("|---|---:|---:|---:|")
    for label, _, _ in rows:
        best, median = min(times[label]) * 1000, statistics.median(times[label]) * 1000
        print(f"| {label} | {best:.0f} | {median:.0f} | {median / 1000 / floor:.2f}× |")


if __name__ == "__main__":
    main()
