"""groundstate.packets — the Piggyback control packet (v1.2.0): schema, parsing, update checks, streaming gate.

from groundstate.packets import parse_output, PacketGate, UpdateValidator

Every part of the face is imported on first use (``__getattr__``): they are pydantic models and what reads them,
and ``groundstate packets --help`` starts without pydantic (bench/cli).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gate import ABORTED, ACCEPTED, GateResult, PacketGate
    from .models import SPEC_VERSION, ControlPacket, Envelope, MemoryOperation, json_schema
    from .parse import Limits, PacketResult, parse_output
    from .tags import AnswerTags, answer_tags
    from .tools import ToolRequest, tool_requests
    from .updates import AcceptedUpdate, DroppedUpdate, UpdateValidator

_LAZY = {
    **dict.fromkeys(("ABORTED", "ACCEPTED", "GateResult", "PacketGate"), "gate"),
    **dict.fromkeys(("SPEC_VERSION", "ControlPacket", "Envelope", "MemoryOperation", "json_schema"), "models"),
    **dict.fromkeys(("Limits", "PacketResult", "parse_output"), "parse"),
    **dict.fromkeys(("AnswerTags", "answer_tags"), "tags"),
    **dict.fromkeys(("ToolRequest", "tool_requests"), "tools"),
    **dict.fromkeys(("AcceptedUpdate", "DroppedUpdate", "UpdateValidator"), "updates"),
}


def __getattr__(name: str) -> Any:
    """A part of the face, imported now (and kept, so this runs once per name)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ABORTED",
    "ACCEPTED",
    "SPEC_VERSION",
    "AcceptedUpdate",
    "AnswerTags",
    "ControlPacket",
    "DroppedUpdate",
    "Envelope",
    "GateResult",
    "Limits",
    "MemoryOperation",
    "PacketGate",
    "PacketResult",
    "ToolRequest",
    "UpdateValidator",
    "answer_tags",
    "json_schema",
    "parse_output",
    "tool_requests",
]
