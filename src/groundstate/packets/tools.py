"""Tool requests: the one channel through which a model asks for an effect.

``control_packet.tool_requests`` is a list of ``{"tool": NAME, "argument": TEXT, "content": TEXT}``. Each entry is
validated strictly (no type coercion, a tool name that is a plain identifier, bounded sizes); entries that fail
are reported with their index and reason, never dropped silently — the caller decides what a malformed request
means (the runtime makes it a hard error of the agent). Nothing in ``mangle_updates`` can request an action.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .models import ControlPacket

TOOL_NAME = r"^/?[a-z][a-z0-9_]{0,63}$"
MAX_REQUESTS = 16
MAX_ARGUMENT_CHARS = 100_000
MAX_CONTENT_CHARS = 1_000_000


class ToolRequest(BaseModel):
    """One tool request in a packet: its type (``/name``), target and payload."""

    model_config = ConfigDict(extra="forbid", strict=True)

    tool: str = Field(pattern=TOOL_NAME)
    argument: str = Field("", max_length=MAX_ARGUMENT_CHARS)
    content: str = Field("", max_length=MAX_CONTENT_CHARS)

    @property
    def name(self) -> str:
        """The tool's name without a leading ``/``."""
        return self.tool.lstrip("/")


def tool_requests(packet: ControlPacket) -> tuple[list[ToolRequest], list[str]]:
    """The packet's valid requests and, for every entry that is not one, what is wrong with it."""
    raw: Any = (packet.model_extra or {}).get("tool_requests")
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"tool_requests must be a list, not {type(raw).__name__}"]
    if len(raw) > MAX_REQUESTS:
        return [], [f"tool_requests has {len(raw)} entries; at most {MAX_REQUESTS} are accepted per turn"]
    requests, problems = [], []
    for index, item in enumerate(raw):
        try:
            requests.append(ToolRequest.model_validate(item))
        except ValidationError as exc:
            detail = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}" for e in exc.errors())
            problems.append(f"tool_requests[{index}]: {detail}")
    return requests, problems
