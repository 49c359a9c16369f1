"""The Control Packet v1.2.0 envelope as pydantic models.

Every section keeps unknown fields (``extra="allow"``) so a newer packet (v1.3.0 fields such as
``dependencies_added``) passes through intact. ``intent_classification`` is the only section a usable packet
must have; the other required sections (``mangle_updates``, ``memory_operations``) default to empty lists and
their absence is reported as a warning by the parser, never silently accepted.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import safejson

SPEC_VERSION = "1.2.0"
REQUIRED = ("intent_classification", "mangle_updates", "memory_operations")
RECOMMENDED = ("execution_metadata", "state_transitions", "impact_analysis", "safety_gates")
OPTIONAL = ("self_correction", "reasoning_trace", "learning_signals")


class _Section(BaseModel):
    """Strict: a field of the wrong JSON type (``"confidence": "0.9"``) is an error the degradation rules handle,
    never silently coerced into something the model did not send."""

    model_config = ConfigDict(extra="allow", strict=True)


class IntentClassification(_Section):
    """Natural language mapped to a structured intent; names are Mangle name constants (``/fix``)."""

    category: Literal["/query", "/mutation", "/instruction"]
    verb: str = Field(pattern=r"^/[A-Za-z0-9._~%-]+$")
    target: str = "codebase"
    constraint: str = "none"
    confidence: float = Field(ge=0.0, le=1.0)


class MemoryOperation(_Section):
    """One memory operation in a control packet: promote a value, store a vector, or forget."""

    op: Literal["promote_to_long_term", "store_vector", "forget", "note"]
    key: str = Field(min_length=1, max_length=512)
    value: str = ""

    @field_validator("key", "value", mode="before")
    @classmethod
    def _whole_characters(cls, text: Any) -> Any:
        """A lone surrogate (half a character: JSON's ``\\ud800`` escape) is U+FFFD, as in a run's events: half a
        character cannot be written as UTF-8, and a value holding one failed the attempt while memory was written,
        after the rules had judged it (found by an attack)."""
        return safejson.whole_characters(text) if isinstance(text, str) else text


class SelfCorrection(_Section):
    triggered: bool
    hypothesis: str | None = None
    recovery_action: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)


class ExecutionMetadata(_Section):
    shard_type: str | None = None
    execution_time_ms: float | None = Field(default=None, ge=0)
    tokens_used: int | None = Field(default=None, ge=0)
    retry_count: int | None = Field(default=None, ge=0)
    blocked_by_constitution: bool | None = None


class StateTransition(_Section):
    from_: str = Field(alias="from")
    to: str
    timestamp: str | None = None
    reason: str | None = None

    model_config = ConfigDict(extra="allow", populate_by_name=True, strict=True)


class ImpactAnalysis(_Section):
    files_affected: list[str] = Field(default_factory=list)
    dependencies_broken: list[str] = Field(default_factory=list)
    tests_impacted: list[str] = Field(default_factory=list)
    estimated_scope: Literal["trivial", "minor", "major", "critical"] | None = None


class SafetyGates(_Section):
    """What the model believes about safety; the kernel's constitution decides independently."""

    requires_user_approval: bool = False
    chesterton_fence_warning: str | None = None
    dangerous_action_blocked: str | None = None
    constitutional_override: str | None = None


class LearningSignals(_Section):
    pattern_id: str | None = None
    success: bool | None = None
    user_accepted: bool | None = None
    rejection_reason: str | None = None
    should_promote_to_learned: bool = False


class ControlPacket(_Section):
    """The control packet (v1.2.0): the model's hidden truth channel, validated before its surface is shown."""

    intent_classification: IntentClassification
    mangle_updates: list[str] = Field(default_factory=list)
    memory_operations: list[MemoryOperation] = Field(default_factory=list)
    self_correction: SelfCorrection | None = None
    reasoning_trace: str | None = None
    execution_metadata: ExecutionMetadata | None = None
    state_transitions: list[StateTransition] = Field(default_factory=list)
    impact_analysis: ImpactAnalysis | None = None
    safety_gates: SafetyGates | None = None
    learning_signals: LearningSignals | None = None


class Envelope(_Section):
    """What the model emits: the hidden truth channel first, then what the user sees."""

    control_packet: ControlPacket
    surface_response: str = ""


@functools.cache
def _envelope_schema() -> dict[str, Any]:
    return Envelope.model_json_schema(by_alias=True)


def json_schema(max_items: int | None = None, max_surface_chars: int | None = None) -> dict[str, Any]:
    """The envelope's JSON Schema, for constrained decoding and for documentation.

    It asks for everything the seed calls required — the three required sections and the surface response —
    while the parser still accepts a packet without them (with warnings): what a model must send is stricter than
    what groundstate tolerates."""
    schema = copy.deepcopy(_envelope_schema())
    schema["$comment"] = f"groundstate Control Packet v{SPEC_VERSION}"
    schema["required"] = ["control_packet", "surface_response"]
    schema["$defs"]["ControlPacket"]["required"] = list(REQUIRED)
    if max_items is not None:  # small models under a grammar can repeat list items forever; bound them
        for section in ("mangle_updates", "memory_operations", "state_transitions"):
            schema["$defs"]["ControlPacket"]["properties"][section]["maxItems"] = max_items
    if max_surface_chars is not None:
        schema["properties"]["surface_response"]["maxLength"] = max_surface_chars
    return schema
