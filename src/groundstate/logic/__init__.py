"""groundstate.logic — a Datalog engine for the Mangle dialect.

from groundstate.logic import Program, Engine, Name
engine = Engine(Program.parse(text, source="policy.mg"))
engine.evaluate()
engine.query("path(/a, X)")
"""

from .engine import Engine, FactError, Stats
from .errors import AnalysisError, Diagnostic, EvaluationError, EvaluationLimitError, LogicError, ParseError, Position
from .program import Program
from .values import Float, List, Map, Name, Pair, Struct, display, display_fact

__all__ = [
    "AnalysisError",
    "Diagnostic",
    "Engine",
    "EvaluationError",
    "EvaluationLimitError",
    "FactError",
    "Float",
    "List",
    "LogicError",
    "Map",
    "Name",
    "Pair",
    "ParseError",
    "Position",
    "Program",
    "Stats",
    "Struct",
    "display",
    "display_fact",
]
