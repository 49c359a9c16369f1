"""groundstate.provenance — where every value of a call came from, reported as facts, and the shipped rules on the
flows they reveal (``flows.mg``). The MCP guard (per client session) and the runtime (per run and agent) keep the
results their calls returned in a ``History`` and ask it, for each new call, which earlier results and whether the
user's request hold each argument's value; both load the same ``flows.mg`` — and the same write holds,
``writes.mg`` — so both decide by the same rules (``shared_rules``).
docs/provenance.md explains the facts, the rules and what value matching cannot see."""

from importlib import resources
from pathlib import Path

from .arguments import (
    MAX_ARGUMENT_DEPTH,
    MAX_ARGUMENT_FACTS,
    MAX_VALUE_CHARS,
    ArgumentKeysCollide,
    ArgumentsRefused,
    ArgumentsTooLarge,
    NotJsonNumber,
    flatten,
)
from .history import (
    MAX_PHRASED_CHARS,
    MAX_SESSIONS,
    MIN_VALUE,
    Asked,
    History,
    Kept,
    Reading,
    Seen,
    Session,
    reading,
    short_words,
    words,
)
from .wording import PERSPECTIVE, Phrase, phrase_of, worded


def shared_rules() -> list[Path]:
    """The shipped rules the MCP guard and the runtime both decide by, in order: ``flows.mg`` (which flows of values
    are refused or held) and ``writes.mg`` (a tool that is not read-only waits for an operator)."""
    folder = resources.files("groundstate.provenance") / "defaults"
    return [Path(str(folder / "flows.mg")), Path(str(folder / "writes.mg"))]


__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "MAX_ARGUMENT_FACTS",
    "MAX_PHRASED_CHARS",
    "MAX_SESSIONS",
    "MAX_VALUE_CHARS",
    "MIN_VALUE",
    "PERSPECTIVE",
    "ArgumentKeysCollide",
    "ArgumentsRefused",
    "ArgumentsTooLarge",
    "Asked",
    "History",
    "Kept",
    "NotJsonNumber",
    "Phrase",
    "Reading",
    "Seen",
    "Session",
    "flatten",
    "phrase_of",
    "reading",
    "shared_rules",
    "short_words",
    "worded",
    "words",
]
