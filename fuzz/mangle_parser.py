"""atheris fuzz harness for the Mangle parser and its ground-fact fast path (learned rules and fact updates are
model-written Mangle text).

    python fuzz/mangle_parser.py fuzz/mangle-corpus -atheris_runs=1000000

Each input is a program text (UTF-8; other bytes are skipped) with enough plain fact lines spliced in for the fast
path to apply, at a line the first byte picks. The harness fails on any exception but ParseError and
AnalysisError, on a parse that differs from the full parser's (positions included), and on an analysis of the
program loaded for an engine (fact lines kept as rows) that differs from the analysis of the full parse.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from groundstate.logic.analysis import analyze
    from groundstate.logic.errors import AnalysisError, ParseError
    from groundstate.logic.ground import MIN_FACTS
    from groundstate.logic.parser import Parser, load_unit, parse_unit

PLAIN = [f"edge({i}, {i + 1})." for i in range(MIN_FACTS)]


def parsed(parse: object, text: str) -> tuple[str, object]:
    try:
        return "parsed", parse(text)  # type: ignore[operator]
    except ParseError as error:
        return "refused", str(error)


def analysed(unit: object) -> object:
    try:
        program = analyze([unit])  # type: ignore[list-item]
    except AnalysisError as error:
        return str(error)
    facts = [(pred, [(repr(values), tuple(pos)) for values, pos in rows]) for pred, rows in program.facts.items()]
    return facts, [(name, info.arity) for name, info in program.predicates.items()], len(program.rules)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    try:
        body = data[1:].decode("utf-8")
    except UnicodeDecodeError:
        return
    lines = body.split("\n")
    at = data[0] % (len(lines) + 1)
    text = "\n".join([*lines[:at], *PLAIN, *lines[at:]])
    full = parsed(lambda t: Parser(t, "<fuzz>").parse_unit(), text)
    fast = parsed(lambda t: parse_unit(t, "<fuzz>"), text)
    if repr(fast) != repr(full):
        raise AssertionError("the fast path parsed differently from the full parser")
    if full[0] == "refused":
        return
    loaded = load_unit(text, "<fuzz>")
    if analysed(loaded) != analysed(Parser(text, "<fuzz>").parse_unit()):
        raise AssertionError("the program loaded with fact rows analyses differently")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
