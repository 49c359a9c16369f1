"""groundstate.guard — one policy in front of the tools of agents people already run: ``groundstate mcp serve``
fronts upstream MCP servers and decides every tools/call with ``mcp.mg`` and the user's rules; ``ReplyPolicy``
applies the user's reply rules to what passes through ``groundstate gateway --gate``."""

from ..provenance import ArgumentsRefused, ArgumentsTooLarge, History
from ..providers import SEPARATOR, McpServerError, Upstreams, connect
from .http_sessions import SessionOwners
from .kept_history import Held, KeptHistory
from .ledger import APPROVED, DENIED, EXPIRED, HELD, ApprovalRefused, Entry, Ledger, Recorded, RowChanged, UnknownCall
from .policy import McpPolicy, Verdict, call_digest, shipped_rules
from .replies import ReplyPolicy, RuledGate
from .server import Approvals, Guard, serve_stdio

__all__ = [
    "APPROVED",
    "DENIED",
    "EXPIRED",
    "HELD",
    "SEPARATOR",
    "ApprovalRefused",
    "Approvals",
    "ArgumentsRefused",
    "ArgumentsTooLarge",
    "Entry",
    "Guard",
    "Held",
    "History",
    "KeptHistory",
    "Ledger",
    "McpPolicy",
    "McpServerError",
    "Recorded",
    "ReplyPolicy",
    "RowChanged",
    "RuledGate",
    "SessionOwners",
    "UnknownCall",
    "Upstreams",
    "Verdict",
    "call_digest",
    "connect",
    "serve_stdio",
    "shipped_rules",
]
