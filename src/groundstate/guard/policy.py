"""The MCP guard's decider: each tools/call becomes facts (server, tool, the arguments flattened to typed facts, a
digest of the exact call, the calling client) in a kernel that runs ``mcp.mg`` and the user's rule files; the guard
obeys ``mcp_verdict`` and nothing else. Python reports and obeys; it never chooses among decisions.

What an attacker controls here: the arguments (from the model driving the client) and the tool lists and
annotations (from the upstream servers). Argument values become facts bounded in number and size, keys and values
as data (never rule text), and a tool's annotations only ever make the shipped policy stricter than "read-only".
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import GroundstateError
from ..kernel import PolicyInvariantError, why_row
from ..logic import LogicError, Name
from ..provenance import flatten, shared_rules
from ..providers import tool_hints
from .judged import OneAtATime
from .places import place_facts


def shipped_rules() -> Path:
    """The shipped ``mcp.mg``."""
    return Path(str(resources.files("groundstate.guard") / "defaults" / "mcp.mg"))


Provenance = Callable[[str, list[tuple[str, Any]]], list[tuple[str, tuple[Any, ...]]]]


@dataclass(frozen=True)
class Verdict:
    """What the policy decided for one call: ``permit``, ``approve`` or ``deny``, with every reason and — for a
    refusal or a held call — the derivation of the first."""

    call: str
    decision: str
    reasons: list[str]
    digest: str
    why: str
    policy: str = ""  # the digest of the policy that decided it (McpPolicy.digest)
    shadow: tuple[str, list[str]] | None = None  # what the shadow policy would decide, and why (never obeyed)
    facts: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # what it was decided from (recorded: policy replay)

    @property
    def disagrees(self) -> bool:
        """A shadow policy is configured and would decide this call otherwise."""
        return self.shadow is not None and self.shadow[0] != self.decision


@dataclass(frozen=True)
class Prepared:
    """A call made into facts, not yet decided (``McpPolicy.prepare``): its name, digest and facts — everything a
    decision needs that takes time in proportion to the arguments (the digest of their text, where each value came
    from), so that the guard computes it before the one-at-a-time decision and its store transaction, not inside."""

    call: str
    server: str
    tool: str
    digest: str
    facts: tuple[tuple[str, tuple[Any, ...]], ...]  # the call, its arguments; then the rest (see judge)
    arguments: int  # how many of ``facts`` are the call and its arguments (whether it is in doubt goes after them)


SHADOW_TIME_LIMIT_S = 0.25  # one shadow decision's limit (Engine's time_limit): a candidate never stalls a call


class McpPolicy:
    """The kernel that decides tools/calls (``files``: the user's rules, added to the shipped ones; ``shadow``: a
    candidate's rule files, decided beside them on every call — the shipped rules and the candidate's in place of
    ``files`` — and never obeyed: each verdict says what the candidate would have decided)."""

    def __init__(self, files: list[Path] | None = None, *, labels_may_loosen: bool = False,
                 shadow: list[Path] | None = None, time_limit: float | None = None) -> None:  # fmt: skip
        """``time_limit``: seconds one decision may take (``policy replay``'s candidate); the shadow always has
        ``SHADOW_TIME_LIMIT_S``: it is never obeyed, so it never holds a call up for long."""
        sources = [shipped_rules(), *shared_rules(), *(files or [])]
        self._calls = OneAtATime(sources, "groundstate-mcp-", time_limit)
        self._shadow = OneAtATime([shipped_rules(), *shared_rules(), *shadow], "groundstate-shadow-",
                                  SHADOW_TIME_LIMIT_S) if shadow else None  # fmt: skip
        # a derivation names each rule by its file's name and line, never by where it is installed: it goes to the
        # client (the refusal's _meta) and the install paths are the operator's business
        self._named = sorted(((str(path), path.name) for path in sources), key=lambda pair: -len(pair[0]))
        # the policy that decides, by content: each rule file's name and text (not where it is installed), and whether
        # labels may loosen — recorded with every decision, so a decision names the rules that made it
        contents = [(path.name, path.read_text(encoding="utf-8")) for path in sources]
        canonical = json.dumps({"files": contents, "labels_may_loosen": labels_may_loosen}, ensure_ascii=False)
        self.digest = "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
        self.kernel = self._calls.kernel
        self._loosen = labels_may_loosen
        self._tool_facts: dict[tuple[str, str], list[tuple[str, tuple[Any, ...]]]] = {}  # what add_tools reported
        self._kernels = [self.kernel, *([self._shadow.kernel] if self._shadow is not None else [])]
        if labels_may_loosen:
            for kernel in self._kernels:
                kernel.assert_facts("flow_labels_may_loosen", ())

    def add_tools(self, server: str, tools: list[Any], labels: Mapping[str, Sequence[str]] | None = None) -> None:
        """Report an upstream server's tools, what their annotations say and the labels the configuration gives
        them (by tool name)."""
        for tool in tools:
            found: list[tuple[str, tuple[Any, ...]]] = [("mcp_tool", (server, tool.name))]
            hints = tool_hints(tool)  # with MCP's defaults, as the runtime reads them
            if hints.read_only:
                found.append(("mcp_read_only", (server, tool.name)))
            if hints.destructive:
                found += [("mcp_destructive", (server, tool.name)), ("flow_destructive", (server, tool.name))]
            if hints.open_world:
                found.append(("flow_open_world", (server, tool.name)))
            given = (labels or {}).get(tool.name, [])
            found += [("flow_label", (server, tool.name, Name.of(label))) for label in given]
            self._tool_facts[(server, tool.name)] = found
        for kernel in self._kernels:
            with kernel.transaction() as tx:
                for tool in tools:
                    for predicate, row in self._tool_facts[(server, tool.name)]:
                        tx.assert_(predicate, row)

    def decide(self, server: str, tool: str, arguments: dict[str, Any], client: str, in_doubt: bool = False,
               provenance: Provenance | None = None, observe: Callable[[Any], None] | None = None
               ) -> Verdict:  # fmt: skip
        """The verdict on one call, with the derivation of its first reason for a refusal or a held call. Each call
        is decided on its own: its facts are supposed for the length of the decision (the decision path: one
        incremental evaluation from them, undone after).
        ``in_doubt``: the tool journal holds an identical call that never finished (``mcp_in_doubt``).
        ``provenance``: the session's facts about where each argument came from (``History.facts``).
        ``observe``: called with the kernel while the call's facts hold (a policy test's coverage reads it)."""
        return self.judge(self.prepare(server, tool, arguments, client, provenance), in_doubt, observe)

    def prepare(self, server: str, tool: str, arguments: dict[str, Any], client: str,
                provenance: Provenance | None = None, flattened: list[tuple[str, Any]] | None = None
                ) -> Prepared:  # fmt: skip
        """The call's name, digest and facts, for ``judge`` (``flattened``: the arguments as ``flatten`` gave them,
        when the caller already has them). Safe to run beside other calls' decisions: it reads no kernel."""
        # the ledger and the derivation name the call alike: 48 random bits, as many as uuid4's first twelve hex
        # digits carry, read straight from the system (building a UUID was 2 µs of a 40 µs decision)
        call = f"call-{os.urandom(6).hex()}"
        flattened = flatten(arguments) if flattened is None else flattened  # first: refused ones are never hashed
        digest = call_digest(server, tool, arguments)
        facts: list[tuple[str, tuple[Any, ...]]] = [("mcp_call", (call, server, tool, digest, client))]
        facts += [("mcp_argument", (call, key, value)) for key, value in flattened]
        given = len(facts)
        facts += place_facts(call, flattened)
        facts += provenance(call, flattened) if provenance is not None else []
        return Prepared(call, server, tool, digest, tuple(facts), given)

    def judge(self, prepared: Prepared, in_doubt: bool = False, observe: Callable[[Any], None] | None = None
              ) -> Verdict:  # fmt: skip
        """The verdict on a prepared call (see ``decide``)."""
        call, server, tool, digest = prepared.call, prepared.server, prepared.tool, prepared.digest
        facts = [*prepared.facts[: prepared.arguments], *([("mcp_in_doubt", (call,))] if in_doubt else []),
                 *prepared.facts[prepared.arguments :]]  # fmt: skip
        verdict = replace(
            self._verdict(self._calls, call, server, tool, digest, facts, observe),
            facts=tuple(facts + self._context(server, tool, facts)),
        )
        if self._shadow is None:
            return verdict
        try:
            shadow = self._judged(self._shadow, call, server, tool, digest, facts, None, explain=False)  # never shown
        except GroundstateError as exc:  # past its time limit, or a broken invariant: said once, then dropped
            self._shadow = None
            return replace(verdict, shadow=("error", [f"the shadow policy could not be evaluated, and is dropped "
                                                      f"until the guard restarts ({_said(exc)})"]))  # fmt: skip
        return replace(verdict, shadow=(shadow.decision, shadow.reasons))

    def _context(self, server: str, tool: str, facts: list[tuple[str, tuple[Any, ...]]]
                 ) -> list[tuple[str, tuple[Any, ...]]]:  # fmt: skip
        """What the kernel held besides the call's own facts that its rules may read: the facts of the called tool
        and of every tool the session's provenance names, and whether labels may loosen — recorded with the
        decision, so that a replay needs nothing else."""
        named = {(server, tool)}
        named.update((str(row[1]), str(row[2])) for predicate, row in facts if predicate == "flow_session_used")
        named.update((str(row[2]), str(row[3])) for predicate, row in facts if predicate == "flow_earlier")
        context = [fact for key in sorted(named) for fact in self._tool_facts.get(key, [])]
        return context + ([("flow_labels_may_loosen", ())] if self._loosen else [])

    def replay(self, facts: list[tuple[str, tuple[Any, ...]]], recorded: str | None = None) -> Verdict:
        """The verdict this policy gives a recorded decision's facts (``Verdict.facts``; the ledger keeps them):
        ``groundstate policy replay``. Use a policy with no tools added: the recorded facts carry the tools'. With
        ``recorded`` (the decision that was made), the derivation is found only when this one differs."""
        [(call, server, tool, digest, _)] = [row for predicate, row in facts if predicate == "mcp_call"]
        return self._verdict(self._calls, str(call), str(server), str(tool), str(digest), facts, None, recorded)

    def _verdict(self, judge: OneAtATime, call: str, server: str, tool: str, digest: str,
                 facts: list[tuple[str, tuple[Any, ...]]], observe: Callable[[Any], None] | None,
                 unless: str | None = None, explain: bool = True) -> Verdict:  # fmt: skip
        try:
            return self._judged(judge, call, server, tool, digest, facts, observe, unless, explain)
        except LogicError as exc:  # a rule that cannot be evaluated on these values: refused, and said why
            reason = f"the policy could not be evaluated on this call's arguments, so it is refused ({_short(exc)})"
            return Verdict(call, "deny", [reason], digest, "", self.digest)

    def _judged(self, judge: OneAtATime, call: str, server: str, tool: str, digest: str,
                facts: list[tuple[str, tuple[Any, ...]]], observe: Callable[[Any], None] | None = None,
                unless: str | None = None, explain: bool = True) -> Verdict:  # fmt: skip
        with judge.judging(facts) as kernel:
            if observe is not None:
                observe(kernel)
            rows = kernel.match("mcp_verdict", call)
            if len(rows) != 1:
                raise PolicyInvariantError(f"mcp_verdict derived {len(rows)} decisions for {server}/{tool}; the "
                                           "rules must derive exactly one")  # fmt: skip
            [(_, decision, reasons)] = rows
            kind, first = str(decision).lstrip("/"), str(reasons[0])
            # the derivation, for the calls someone must read it for (a refusal, a held call); a permit's reasons are
            # its record (deriving the tree costs ten times the decision: docs/benchmarks.md)
            # a replay explains a flip only; a shadow verdict's derivation is never shown
            explain = explain and (kind != "permit" if unless is None else kind != unless)
            why = why_row(kernel, "mcp_decision", call, decision, first).render() if explain else ""
        for path, name in self._named:
            why = why.replace(f"the rule at {path}:", f"the rule at {name}:")
        return Verdict(call, kind, [str(r) for r in reasons], digest, why, self.digest)


def _said(exc: GroundstateError) -> str:
    """An error as a client may read it: a logic error as ``_short`` gives it, any other by its message."""
    return _short(exc) if isinstance(exc, LogicError) else " ".join(str(exc).split())[:300]


def _short(exc: LogicError) -> str:
    """The engine's message without the rule file's path (clients see it; the path is the operator's business):
    what failed, and the rule's file name and line."""
    detail = " ".join(exc.message.split(" (in the clause", 1)[0].split())[:300]
    where = exc.position
    return f"{detail}; the rule at {Path(where.source).name}:{where.line}" if where is not None else detail


def call_digest(server: str, tool: str, arguments: dict[str, Any]) -> str:
    """sha256 of the exact call: the same server, tool and arguments always give the same digest."""
    canonical = json.dumps({"server": server, "tool": tool, "arguments": arguments}, sort_keys=True,
                           separators=(",", ":"), ensure_ascii=False)  # fmt: skip
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def check_arguments(arguments: dict[str, Any]) -> list[tuple[str, Any]]:
    """Refuse (ArgumentsRefused) arguments the policy could not judge whole, before anything hashes or stores
    them; else the arguments flattened, as the policy sees them (``McpPolicy.prepare`` takes them)."""
    return flatten(arguments)
