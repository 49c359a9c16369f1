"""Positioned diagnostics shared by the parser, the analysis and the evaluator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..errors import InputError, LimitError


class Position(NamedTuple):
    """Where something stands in a source: 1-based line and column (a tuple: one is made per token)."""

    source: str
    line: int
    column: int
    line_text: str = ""

    def __str__(self) -> str:
        return f"{self.source}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Diagnostic:
    """One problem in a program: where it is and what is wrong."""

    position: Position | None
    message: str
    severity: str = "error"

    def format(self) -> str:
        """``FILE:LINE:COL: error: MSG`` then the source line and a caret under the column."""
        if self.position is None:
            return f"{self.severity}: {self.message}"
        head = f"{self.position}: {self.severity}: {self.message}"
        text = self.position.line_text.expandtabs(1).rstrip("\r\n")
        if not text:
            return head
        caret = " " * (self.position.column - 1) + "^"
        return f"{head}\n  {text}\n  {caret}"


class LogicError(InputError):
    """Base of every error groundstate.logic raises on bad programs, data or queries."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.format() for d in diagnostics))

    @property
    def message(self) -> str:
        """The first diagnostic's message."""
        return self.diagnostics[0].message if self.diagnostics else ""

    @property
    def position(self) -> Position | None:
        """Where the first diagnostic points, if anywhere."""
        return self.diagnostics[0].position if self.diagnostics else None


class ParseError(LogicError):
    """The text is not a well-formed program (or query)."""

    def __init__(self, message: str, position: Position) -> None:
        super().__init__([Diagnostic(position, message)])

    @property
    def source(self) -> str:
        """The file (or ``<input>``) the error is in."""
        assert self.position is not None
        return self.position.source

    @property
    def line(self) -> int:
        """The 1-based line of the error."""
        assert self.position is not None
        return self.position.line

    @property
    def column(self) -> int:
        """The 1-based column of the error."""
        assert self.position is not None
        return self.position.column


class AnalysisError(LogicError):
    """The program parses but is not valid: all problems found, each positioned."""


class EvaluationError(LogicError):
    """Evaluation was aborted: a function failed, or the created-fact limit was reached."""

    def __init__(self, message: str, position: Position | None = None) -> None:
        super().__init__([Diagnostic(position, message)])


class FactError(LogicError):
    """Facts given to assert_facts / retract_facts, or a query, do not fit the program."""

    def __init__(self, message: str) -> None:
        super().__init__([Diagnostic(None, message)])


class ValueConversionError(InputError, ValueError):
    """A Python value or a text has no Mangle value (not a name constant, an integer beyond int64)."""


class EvaluationLimitError(EvaluationError, LimitError):
    """Evaluation stopped at a bound on values (string length, list size, nesting depth): a limit, not a bug."""


class NotAGroundFact(InputError, ValueError):
    """Text that should state one ground fact (a model's mangle_update) states something else; the message says what."""
