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

DECISIONS = ("permit", "approve", "deny", "pause", "abort", "continue")


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
    arguments: dict[str, Any] = Field(default_factory=dict)  # what it was called with (flows.mg's flow_steered)
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


class _RuntimeEarlier(BaseModel):
    """A tool call the agent made earlier in the attempt, and what its result said (provenance)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    tool: str = Field(pattern=r"^[a-z_]+$")
    argument: str = Field("", max_length=100_000)
    result: str = Field(max_length=1_000_000)


class _RuntimeCase(BaseModel):
    """A run's checkpoint: a tool call before it runs, or the end of an attempt."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=200)
    agent: str = Field("writer_x", pattern=r"^[a-z][a-z0-9]*_[a-z0-9_]*$")  # its role prefix is what precedes _
    checkpoint: Literal["tool_call", "finished"]
    tool: str = Field("", pattern=r"^[a-z_]*$")  # tool_call: the tool and its argument (and a write's content)
    argument: str = Field("", max_length=100_000)
    content: str | None = Field(None, max_length=100_000)
    output: str = Field("", max_length=100_000)  # finished: the answer's surface text, its status, a hard error
    status: str = Field("success", pattern=r"^[a-z_]+$")
    error: str | None = Field(None, max_length=10_000)
    error_kind: str = Field("failure", pattern=r"^[a-z_]+$")
    request: str = Field("the case", min_length=1, max_length=100_000)  # the agent's instructions (the request)
    earlier: list[_RuntimeEarlier] = Field(default_factory=list, max_length=200)  # tool_call: the attempt's calls
    expect: Literal["pause", "abort", "continue", "deny"]
    reasons: list[str] | None = None  # "category: reason", the leading one first, when given


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    decider: Literal["mcp", "runtime"]
    rules: list[str] = Field(default_factory=list)
    servers: dict[str, dict[str, _Tool]] = Field(default_factory=dict)  # mcp
    patterns: list[str] = Field(default_factory=list)  # runtime: cortex pattern files
    disable_guards: list[str] = Field(default_factory=list)  # runtime: shipped breakers turned off
    disable_patterns: list[str] = Field(default_factory=list)  # runtime: shipped patterns turned off
    case: list[dict[str, Any]] = Field(min_length=1)


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
    earlier: tuple[tuple[str, str, str, dict[str, Any]], ...] = ()  # (server, tool, result, arguments), in order
    checkpoint: Any = None  # a runtime case: its Checkpoint (runtime_cases.py)


@dataclass
class CaseFile:
    """A parsed test file: its rule files (resolved), the servers' tools, the cases."""

    path: Path
    decider: str
    rules: list[Path]
    tools: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # server -> tool -> annotations
    cases: list[Case] = field(default_factory=list)
    patterns: list[Path] = field(default_factory=list)  # runtime
    disabled_guards: list[str] = field(default_factory=list)
    disabled_patterns: list[str] = field(default_factory=list)


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
        raise PolicyTestError(_problems(path, text, exc, ())) from None
    kind = _Case if parsed.decider == "mcp" else _RuntimeCase
    given: list[_Case | _RuntimeCase] = []
    for number, case in enumerate(parsed.case):
        try:
            given.append(kind.model_validate(case))
        except ValidationError as exc:
            raise PolicyTestError(_problems(path, text, exc, ("case", number))) from None
    rules = [(path.parent / rule).resolve() for rule in parsed.rules]
    patterns = [(path.parent / file).resolve() for file in parsed.patterns]
    for key, files in (("rules", rules), ("patterns", patterns)):
        for number, file in enumerate(files):
            if not file.is_file():
                raise PolicyTestError(f"{path}:{_line(text, (key,))}: {key}.{number}: no such file {file}")
    names = [case.name for case in given]
    for name in {n for n in names if names.count(n) > 1}:
        raise PolicyTestError(f"{path}:{_case_line(text, name)}: two cases are named {name!r}")
    tools = {server: {tool: listed_tool.model_dump() for tool, listed_tool in listed.items()}
             for server, listed in parsed.servers.items()}  # fmt: skip
    cases = [_mcp_case(path, text, case, tools) if isinstance(case, _Case) else _runtime_case(text, case)
             for case in given]  # fmt: skip
    return CaseFile(path, parsed.decider, rules, tools, cases, patterns, parsed.disable_guards,
                    parsed.disable_patterns)  # fmt: skip


def _problems(path: Path, text: str, error: ValidationError, within: tuple[Any, ...]) -> str:
    """Each validation problem as ``FILE:LINE: key: why`` (``within``: the case the model validated)."""
    problems = []
    for problem in error.errors()[:10]:
        loc = (*within, *problem["loc"])
        problems.append(f"{path}:{_line(text, loc)}: {'.'.join(str(part) for part in loc)}: {problem['msg']}")
    return "\n".join(problems)


def _mcp_case(path: Path, text: str, case: _Case, tools: dict[str, dict[str, dict[str, Any]]]) -> Case:
    server, tool = case.call.split("/")
    if tool not in tools.get(server, {}):
        raise PolicyTestError(f"{path}:{_case_line(text, case.name)}: case {case.name!r}: {case.call} is not among "
                              f"the file's [servers.{server}] tools")  # fmt: skip
    earlier = tuple((made.call.split("/")[0], made.call.split("/")[1], made.result, made.arguments)
                    for made in case.earlier)  # fmt: skip
    return Case(case.name, server, tool, case.arguments, case.client, case.in_doubt, case.expect, case.reasons,
                _case_line(text, case.name), case.request, earlier)  # fmt: skip


def _runtime_case(text: str, case: _RuntimeCase) -> Case:
    from .runtime_cases import Checkpoint

    earlier = tuple((made.tool, made.argument, made.result) for made in case.earlier)
    point = Checkpoint(case.agent, case.checkpoint, case.tool, case.argument, case.content, case.output,
                       case.status, case.error, case.error_kind, case.request, earlier)  # fmt: skip
    return Case(case.name, "", "", {}, "", False, case.expect, case.reasons, _case_line(text, case.name),
                checkpoint=point)  # fmt: skip


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
