"""A Mangle program: one or more parsed source files, ready to be analysed by an Engine."""

from __future__ import annotations

from pathlib import Path

from .analysis import AnalyzedProgram, analyze
from .ast import SourceUnit
from .gcpause import gc_paused
from .parser import parse_unit


class Program:
    """Parsed source files. ``Program.parse`` and ``Program.load`` raise ParseError on bad syntax."""

    def __init__(self, units: list[SourceUnit]) -> None:
        self.units = units

    @classmethod
    def parse(cls, text: str, source: str = "<input>") -> Program:
        return cls([parse_unit(text, source)])

    @classmethod
    def load(cls, *paths: str | Path) -> Program:
        units = []
        for path in paths:
            p = Path(path)
            units.append(parse_unit(p.read_text(encoding="utf-8"), str(path)))
        return cls(units)

    def __add__(self, other: Program) -> Program:
        return Program(self.units + other.units)

    def analyze(self, check_bounds: bool = True) -> AnalyzedProgram:
        """Static analysis only; raises AnalysisError listing every problem found."""
        with gc_paused():
            return analyze(self.units, check_bounds)
