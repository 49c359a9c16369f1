"""What an MCP tool's annotations say, with MCP's defaults for those it leaves unset — read in one place, so the
guard and the runtime report the same facts of the same tool to the shared rules (writes.mg, flows.mg)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolHints:
    """``read_only``: readOnlyHint true (unset: false). ``destructive``: the tool may destroy data — destructiveHint
    true, or unset on a tool that is not read-only (MCP's default for a writing tool); never for a read-only one.
    ``open_world``: it reaches the open world — openWorldHint true or unset (MCP's default)."""

    read_only: bool
    destructive: bool
    open_world: bool


def tool_hints(tool: Any) -> ToolHints:
    """The hints of an MCP ``Tool`` (anything with an ``annotations`` attribute, None when the server gave none)."""
    hints = getattr(tool, "annotations", None)
    read_only = bool(hints is not None and getattr(hints, "read_only_hint", None))
    destructive = not read_only and (hints is None or getattr(hints, "destructive_hint", None) is not False)
    open_world = hints is None or getattr(hints, "open_world_hint", None) is not False
    return ToolHints(read_only, destructive, open_world)
