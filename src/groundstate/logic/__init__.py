"""groundstate.logic — a Datalog engine for the Mangle dialect.

from groundstate.logic import Program, Engine, Name
engine = Engine(Program.parse(text, source="policy.mg"))
engine.evaluate()
engine.query("path(/a, X)")

The public face: programs and the engine, values, positioned errors, the syntax tree (for tools that read rules,
like the kernel's linter and explainer), one-ground-fact parsing (for model-written updates) and declared bounds.
"""

from .analysis import AnalyzedProgram, PredicateInfo, bounds_problem
from .ast import Apply, Atom, Clause, Comparison, Const, FactRow, Negation, SourceUnit, Term, Var
from .builtins import FUNCTIONS
from .core import Stats
from .engine import Engine
from .errors import (
    AnalysisError,
    Diagnostic,
    EvaluationError,
    EvaluationLimitError,
    FactError,
    LogicError,
    NotAGroundFact,
    ParseError,
    Position,
    ValueConversionError,
)
from .facts import CONSTRUCTORS, GroundFact, parse_ground_fact
from .fundeps import FunctionalDependencyError
from .lint import LintFinding, lint_units
from .parser import load_unit, parse_atom, parse_unit
from .program import Program
from .recorded import RecordedFactsError, decode_facts, encode_facts, facts_json, facts_of_json
from .values import INT64_MAX, Float, List, Map, Name, Pair, Struct, display, display_fact, sort_facts, to_value

__all__ = [
    "CONSTRUCTORS",
    "FUNCTIONS",
    "INT64_MAX",
    "AnalysisError",
    "AnalyzedProgram",
    "Apply",
    "Atom",
    "Clause",
    "Comparison",
    "Const",
    "Diagnostic",
    "Engine",
    "EvaluationError",
    "EvaluationLimitError",
    "FactError",
    "FactRow",
    "Float",
    "FunctionalDependencyError",
    "GroundFact",
    "LintFinding",
    "List",
    "LogicError",
    "Map",
    "Name",
    "Negation",
    "NotAGroundFact",
    "Pair",
    "ParseError",
    "Position",
    "PredicateInfo",
    "Program",
    "RecordedFactsError",
    "SourceUnit",
    "Stats",
    "Struct",
    "Term",
    "ValueConversionError",
    "Var",
    "bounds_problem",
    "decode_facts",
    "display",
    "display_fact",
    "encode_facts",
    "facts_json",
    "facts_of_json",
    "lint_units",
    "load_unit",
    "parse_atom",
    "parse_ground_fact",
    "parse_unit",
    "sort_facts",
    "to_value",
]
