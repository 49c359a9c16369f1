"""A Mangle program: one or more parsed source files, ready to be analysed by an Engine."""

from __future__ import annotations

from pathlib import Path

from .analysis import AnalyzedProgram, analyze
from .ast import SourceUnit
from .errors import ParseError, Position
from .gcpause import gc_paused
from .parser import load_unit


def _encoding_error(data: bytes, exc: UnicodeDecodeError, source: str) -> ParseError:
    before = data[: exc.start]
    line = before.count(b"\n") + 1
    line_start = before.rfind(b"\n") + 1
    column = len(before[line_start:].decode("utf-8", errors="replace")) + 1
    text = data[line_start:].split(b"\n", 1)[0].decode("utf-8", errors="replace")
    return ParseError(
        f"invalid UTF-8 (byte 0x{data[exc.start]:02x}); source files must be UTF-8",
        Position(source, line, column, text),
    )


class Program:
    """Parsed source files. ``Program.parse`` and ``Program.load`` raise ParseError on bad syntax."""

    def __init__(self, units: list[SourceUnit]) -> None:
        self.units = units
        self._analyzed: dict[bool, AnalyzedProgram] = {}

    @classmethod
    def parse(cls, text: str, source: str = "<input>") -> Program:
        """A program from source text (``source`` names it in diagnostics)."""
        return cls([load_unit(text, source)])

    @classmethod
    def load(cls, *paths: str | Path) -> Program:
        """A program from ``.mg`` files, analyzed together."""
        units = []
        for path in paths:
            data = Path(path).read_bytes()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _encoding_error(data, exc, str(path)) from None
            units.append(load_unit(text, str(path)))
        return cls(units)

    def __add__(self, other: Program) -> Program:
        return Program(self.units + other.units)

    def analyze(self, check_bounds: bool = True) -> AnalyzedProgram:
        """Static analysis only; raises AnalysisError listing every problem found. The result is kept: engines
        only read it, so every engine built from one Program shares one analysis."""
        if check_bounds not in self._analyzed:
            with gc_paused():
                self._analyzed[check_bounds] = analyze(self.units, check_bounds)
        return self._analyzed[check_bounds]
