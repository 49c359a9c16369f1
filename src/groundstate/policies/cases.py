"""Policy test files: TOML, next to the rules they test. A file names the decider (``mcp``: the MCP guard's
policy), your rule files (relative to it), the tools the servers list with their annotations, and cases — a call and
the decision (and, optionally, the reasons) expected of it:

    decider = "mcp"
    rules = ["mine.mg"]

    [servers.git.git_add]
    read_only = false

    [[case]]                       # optional: client, in_doubt, request (the user's), earlier calls' results
    name = "staging waits for an operator"
    call = "git/git_add"
    arguments = { repo_path = "/srv/repo", files = ["a.md"] }
    expect = "approve"

A test file is user input: anything malformed is a PolicyTestError naming the file, the line and the key.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigurationError

DECISIONS = ("permit", "approve", "deny")


class PolicyTestError(ConfigurationError, ValueError):
    """A policy test file that cannot be used (exit 2: a failing case is exit 1); the message names the file, the
    line and what is wrong."""


class _Tool(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    read_only: bool = False
    destructive: bool | None = None  # unset: MCP's default (destructive unless read-only)
    open_world: bool | None = None  # unset: MCP's default (open world)
    labels: list[str] = Field(default_factory=list)  # untrusted, private, outbound, ... (docs/provenance.md)


class _Earlier(BaseModel):
    """A call the client session made before the case's call, and what its result said (provenance)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    call: str = Field(pattern=r"^[^/\s]+/[^/\s]+$")  # SERVER/TOOL
    result: str = Field(max_length=1_000_000)


class _Case(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=200)
    call: str = Field(pattern=r"^[^/\s]+/[^/\s]+$")  # SERVER/TOOL
    arguments: dict[str, Any] = Field(default_factory=dict)
    client: str = "policy test"
    in_doubt: bool = False
    request: str = ""  # the user's request the client declared (_meta["groundstate/request"])
    earlier: list[_Earlier] = Field(default_factory=list, max_length=200)  # the session's earlier calls and results
    expect: Literal["permit", "approve", "deny"]
    reasons: list[str] | None = None  # exactly these, in order, when given


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    decider: Literal["mcp"]
    rules: list[str] = Field(default_factory=list)
    servers: dict[str, dict[str, _Tool]] = Field(default_factory=dict)
    case: list[_Case] = Field(min_length=1)


@dataclass(frozen=True)
class Case:
    """One expected decision, and where it is written."""

    name: str
    server: str
    tool: str
    arguments: dict[str, Any]
    client: str
    in_doubt: bool
    expect: str
    reasons: list[str] | None
    line: int
    request: str = ""
    earlier: tuple[tuple[str, str, str], ...] = ()  # (server, tool, result) of the session's earlier calls


@dataclass
class CaseFile:
    """A parsed test file: its rule files (resolved), the servers' tools, the cases."""

    path: Path
    decider: str
    rules: list[Path]
    tools: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # server -> tool -> annotations
    cases: list[Case] = field(default_factory=list)


def load_case_file(path: Path) -> CaseFile:
    """``path`` parsed and checked; PolicyTestError naming file, line and key otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyTestError(f"{path}: cannot be read ({exc})") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyTestError(f"{path}: not valid TOML: {exc}") from None
    try:
        parsed = _File.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:10]:
            key = ".".join(str(part) for part in error["loc"])
            problems.append(f"{path}:{_line(text, error['loc'])}: {key}: {error['msg']}")
        raise PolicyTestError("\n".join(problems)) from None
    rules = [(path.parent / rule).resolve() for rule in parsed.rules]
    for number, rule in enumerate(rules):
        if not rule.is_file():
            raise PolicyTestError(f"{path}:{_line(text, ('rules',))}: rules.{number}: no such file {rule}")
    names = [case.name for case in parsed.case]
    for name in {n for n in names if names.count(n) > 1}:
        raise PolicyTestError(f"{path}:{_case_line(text, name)}: two cases are named {name!r}")
    tools = {server: {tool: given.model_dump() for tool, given in listed.items()}
             for server, listed in parsed.servers.items()}  # fmt: skip
    cases = []
    for case in parsed.case:
        server, tool = case.call.split("/")
        if tool not in tools.get(server, {}):
            raise PolicyTestError(f"{path}:{_case_line(text, case.name)}: case {case.name!r}: {case.call} is not "
                                  f"among the file's [servers.{server}] tools")  # fmt: skip
        earlier = tuple((made.call.split("/")[0], made.call.split("/")[1], made.result) for made in case.earlier)
        cases.append(Case(case.name, server, tool, case.arguments, case.client, case.in_doubt, case.expect,
                          case.reasons, _case_line(text, case.name), case.request, earlier))  # fmt: skip
    return CaseFile(path, parsed.decider, rules, tools, cases)


def _case_line(text: str, name: str) -> int:
    """The line of the case's ``name = "..."``."""
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r'^\s*name\s*=\s*["\']' + re.escape(name) + r'["\']', line):
            return number
    return 1


def _line(text: str, loc: tuple[Any, ...]) -> int:
    """The line a validation error points at: the n-th ``[[case]]`` for a case's key, else the key's first line."""
    lines = text.splitlines()
    if loc and loc[0] == "case" and len(loc) > 1 and isinstance(loc[1], int):
        headers = [n for n, line in enumerate(lines, 1) if line.strip() == "[[case]]"]
        start = headers[loc[1]] if loc[1] < len(headers) else 1
        key = str(loc[2]) if len(loc) > 2 else ""
        for number in range(start, len(lines) + 1):
            if key and re.match(rf"^\s*{re.escape(key)}\s*=", lines[number - 1]):
                return number
            if number > start and lines[number - 1].strip().startswith("["):
                break
        return start
    key = str(loc[-1]) if loc else ""
    for number, line in enumerate(lines, 1):
        if key and (re.match(rf"^\s*{re.escape(key)}\s*=", line) or f".{key}]" in line or f"[{key}]" in line):
            return number
    return 1
