"""groundstate.packets — the Piggyback control packet (v1.2.0): schema, parsing, update checks, streaming gate.

from groundstate.packets import parse_output, PacketGate, UpdateValidator
"""

from .gate import ABORTED, ACCEPTED, GateResult, PacketGate
from .models import SPEC_VERSION, ControlPacket, Envelope, MemoryOperation, json_schema
from .parse import Limits, PacketResult, parse_output
from .tools import ToolRequest, tool_requests
from .updates import AcceptedUpdate, DroppedUpdate, UpdateValidator

__all__ = [
    "ABORTED",
    "ACCEPTED",
    "SPEC_VERSION",
    "AcceptedUpdate",
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
    "json_schema",
    "parse_output",
    "tool_requests",
]
