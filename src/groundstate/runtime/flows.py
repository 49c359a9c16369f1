"""Where every value of an agent's tool call came from, reported for the shipped ``flows.mg`` — the rules the MCP
guard decides by too — over the run's own history. Python reports; guards.mg and flows.mg decide.

An agent's session is what its context held, rebuilt from the run's log at each call (so a driver that resumes the
run elsewhere sees the same): the memory entries its prompt holds (the run's notes, recalled entries:
``memory/recall``, content written by others, for their writer may have read anything), the results of its tool
calls in this attempt and, for every agent upstream of it (transitively), that agent's tool results and its output.
An agent's output carries what its context held: content a researcher read on the web taints what a writer
downstream copies out of the researcher's summary, and the derivation names the web search it came from. The user's
request is the workflow's: its agents' instructions and the operator's edits of them.

Tools are named as flows.mg sees them: the runtime's own (``web_search``, ``write_file``, ...) and your Python tools
under the server ``groundstate``, an MCP tool under its server and its own name, an upstream agent's output under
``agent``. ``web_search`` reaches the open world (its results are written by others, and a query is a message to
whoever serves the search); the workspace's tools and ``execute_python`` (no network in the sandbox) are closed
world; a Python tool run outside the sandbox is open world, as MCP assumes of a tool that says nothing. Code computes
its result from what it is given: ``execute_python``'s and your Python tools' results carry what every other source
of the run returned (``flow_carries``), so a value code rebuilt from an email is still the email's. MCP tools are
as their servers annotate them, with the labels of ``[mcp.servers.NAME.labels]`` — and their results count as
written by others in a workflow whatever the annotations say (a label only ever adds to that).

A call's arguments are flattened as the guard flattens them: an MCP tool's JSON object by its keys; a built-in
tool's as ``target`` and ``payload`` (the ToolCall event's fields), and a target that names a path another way
(``./a.sh``, ``notes/../a.sh``) also as ``resolved`` (``a.sh``).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import tools as python_tools
from ..logic import Name
from ..provenance import ArgumentsRefused, History, Session, flatten
from ..providers import tool_hints
from .state import RunState
from .workflow import TOOLS, AgentSpec, Workflow, agent_tool_name, is_mcp_tool

Fact = tuple[str, tuple[Any, ...]]
SERVER = "groundstate"  # the runtime's own tools and your Python tools
AGENT = "agent"  # an upstream agent's output, by the agent's id
COMPUTES = ("execute_python",)  # built-in tools whose result is computed from their arguments (your Python tools too)
# the runtime's own tools: (read-only, open world, destructive)
BUILTIN: dict[str, tuple[bool, bool, bool]] = {
    "web_search": (True, True, False),
    "read_file": (True, False, False),
    "list_files": (True, False, False),
    "write_file": (False, False, False),
    "delete_file": (False, False, True),
    "execute_python": (False, False, False),
}
assert set(BUILTIN) == set(TOOLS), "every built-in tool has its nature here"


@dataclass(frozen=True)
class Nature:
    """A tool as flows.mg sees it: where it is (server, name), whether it changes nothing or reaches the open
    world, and its labels (untrusted, private, outbound, trusted, internal)."""

    server: str
    tool: str
    read_only: bool
    open_world: bool
    labels: tuple[str, ...] = ()
    is_mcp: bool = False
    computes: bool = False  # its result is computed from its arguments (code): it carries what the session held
    destructive: bool = False  # a call may destroy what it names


# what the agent's memory gave its prompt (the run's notes, long-term and similar entries): written by agents whose
# context may have held anything, so content written by others
MEMORY = Nature("memory", "recall", True, False, ("untrusted",))


def natures(workflow: Workflow, mcp: Mapping[str, tuple[str, Any]],
            labels: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[str, Nature]:  # fmt: skip
    """Every tool the workflow's agents may use, by the name the agent calls it (``mcp``: the connected MCP tools by
    that name, as ``McpTools.tools`` has them; ``labels``: the configuration's labels by server and tool)."""
    found: dict[str, Nature] = {}
    for spec in workflow.agents:
        for ref in spec.tools:
            name = agent_tool_name(ref)
            if name in BUILTIN:
                read_only, open_world, destructive = BUILTIN[name]
                found[name] = Nature(SERVER, name, read_only, open_world, computes=name in COMPUTES,
                                     destructive=destructive)  # fmt: skip
            elif is_mcp_tool(ref) and name in mcp:
                server, tool = mcp[name]
                hints = tool_hints(tool)
                own = tuple(dict.fromkeys(["untrusted", *labels.get(server, {}).get(tool.name, [])]))
                found[name] = Nature(server, tool.name, hints.read_only, hints.open_world, own, is_mcp=True,
                                     destructive=hints.destructive)  # fmt: skip
            elif name in python_tools.REGISTRY:
                registered = python_tools.REGISTRY[name]
                found[name] = Nature(SERVER, name, registered.read_only, not registered.sandboxed, computes=True)
    return found


@dataclass
class _Kept:
    """An agent's session as this process last built it: what it recorded, in order, under which request."""

    history: History
    session: Session
    request: str
    recorded: list[str]


class RunFlows:
    """The provenance of a run's tool calls: the tools' facts once, and each call's facts from the run's log.

    An agent's session is kept between its calls and only what is new is indexed (a call costs the new results,
    not all of them again); when the log no longer starts with what was recorded (a new attempt, an edited
    instruction) it is built afresh."""

    def __init__(self, workflow: Workflow, tools: dict[str, Nature], *, labels_may_loosen: bool = False,
                 max_calls: int = 200, max_bytes: int = 1 << 20) -> None:  # fmt: skip
        self.workflow, self.tools, self.labels_may_loosen = workflow, tools, labels_may_loosen
        self.max_calls, self.max_bytes = max_calls, max_bytes
        self._kept: dict[str, _Kept] = {}

    def tool_facts(self) -> list[Fact]:
        """What each tool is, and what each agent's output carries (the tools its session may hold results of)."""
        out: list[Fact] = [("flow_labels_may_loosen", ())] if self.labels_may_loosen else []
        natures = {(n.server, n.tool): n for n in [*self.tools.values(), MEMORY]}
        sources = [*natures, *((AGENT, spec.id) for spec in self.workflow.agents)]
        for nature in natures.values():
            out.append(("flow_tool", (nature.server, nature.tool)))
            if nature.read_only:
                out.append(("flow_read_only", (nature.server, nature.tool)))
            if nature.open_world:
                out.append(("flow_open_world", (nature.server, nature.tool)))
            if nature.destructive:
                out.append(("flow_destructive", (nature.server, nature.tool)))
            out += [("flow_label", (nature.server, nature.tool, Name.of(label))) for label in nature.labels]
            if nature.computes:  # code computes from what it is given: a value it prints may be anything it read
                out += [("flow_carries", (nature.server, nature.tool, *source)) for source in sources
                        if source != (nature.server, nature.tool)]  # fmt: skip
        for spec in self.workflow.agents:
            out += self.agent_facts(spec)
        return out

    def agent_facts(self, spec: AgentSpec) -> list[Fact]:
        """An agent's output as a source: read-only, closed world, carrying what its tools and upstream agents
        returned (flows.mg makes it untrusted or private when any of those is)."""
        out: list[Fact] = [("flow_tool", (AGENT, spec.id)), ("flow_read_only", (AGENT, spec.id))]
        for name in spec.agent_tools:
            nature = self.nature(name)
            out.append(("flow_carries", (AGENT, spec.id, nature.server, nature.tool)))
        out += [("flow_carries", (AGENT, spec.id, AGENT, upstream)) for upstream in spec.depends_on]
        return out

    def nature(self, tool: str) -> Nature:
        """The tool an agent calls ``tool``; one the workflow does not give is taken at MCP's defaults (open world,
        not read-only): the strictest reading."""
        return self.tools.get(tool) or Nature(SERVER, tool, False, True)

    def call(
        self, state: RunState, agent: str, seq: int, tool: str, target: str, payload: str,
        remembered: Sequence[tuple[str, str]] = (),
    ) -> tuple[str, list[Fact]]:  # fmt: skip
        """The call's name in flows.mg and its facts: which tool it calls, and where each argument's value came
        from (``remembered``: the memory entries the agent's prompt holds). ``ArgumentsRefused`` when its arguments
        cannot be judged whole (they are then not run either)."""
        name, nature = f"{agent}#{seq}", self.nature(tool)
        flattened = flatten(self._arguments(nature, target, payload))  # first: refused arguments cost nothing more
        kept = self._session(state, agent, seq, remembered)
        facts: list[Fact] = [("flow_call", (name, nature.server, nature.tool))]
        facts += kept.history.facts(kept.session, name, flattened)
        return name, facts

    def _session(self, state: RunState, agent: str, seq: int, remembered: Sequence[tuple[str, str]]) -> _Kept:
        """The agent's session before call ``seq``: the kept one with what is new recorded, or a new one."""
        seen: list[tuple[str, Nature, str, Any]] = [(f"memory#{key}", MEMORY, value, None) for key, value in remembered
                                                    if value]  # fmt: skip
        seen += list(self._seen(state, agent, seq))
        request = self._request(state)
        kept = self._kept.get(agent)
        if kept is None or kept.request != request or [e[0] for e in seen[: len(kept.recorded)]] != kept.recorded:
            history = History(self.max_calls, self.max_bytes)
            kept = self._kept[agent] = _Kept(history, history.session(agent), request, [])
            history.declare(kept.session, request)
        # only what is new, each call's origins worked out again from its arguments, never kept from its decision:
        # a round's calls are all decided before any runs, so call 4's decision did not see call 3's result, while
        # a driver resuming the run elsewhere rebuilds the session from the log, where it did — both must agree
        for earlier, source, text, sent in seen[len(kept.recorded) :]:
            arguments = self._flattened(source, *sent) if sent is not None else None
            kept.history.record(kept.session, earlier, source.server, source.tool, text, arguments=arguments)
            kept.recorded.append(earlier)
        return kept

    def _request(self, state: RunState) -> str:
        """The user's request: every agent's instructions, and the operator's edits of them."""
        texts = [spec.instructions for spec in self.workflow.agents]
        texts += [node.instructions for node in state.nodes.values() if node.instructions]
        return "\n".join(texts)

    def _seen(self, state: RunState, agent: str, seq: int) -> Iterator[tuple[str, Nature, str, Any]]:
        """(earlier call, its tool, what it returned, its (target, payload) or None) for everything the agent's
        context held before call ``seq``: each upstream agent's tool results and output (upstream first, each once),
        then its own results."""
        for upstream in self._lineage(agent):
            node = state.nodes.get(upstream)
            if node is None:
                continue
            yield from self._results(upstream, node.tools)
            if node.output:
                yield f"{upstream}#output", Nature(AGENT, upstream, True, False), node.output, None
        node = state.nodes.get(agent)
        if node is not None:
            yield from self._results(agent, [call for call in node.tools if call["seq"] != seq])

    def _results(self, agent: str, calls: list[dict[str, Any]]) -> Iterator[tuple[str, Nature, str, Any]]:
        for call in calls:
            if call.get("output"):
                sent = (str(call.get("target", "")), str(call.get("payload", "")))
                yield f"{agent}#{call['seq']}", self.nature(str(call["tool"])), str(call["output"]), sent

    def _flattened(self, nature: Nature, target: str, payload: str) -> list[tuple[str, Any]] | None:
        """An earlier call's arguments as the policy judged them: flows.mg asks whether content written by others
        chose them (None for arguments that could not be judged whole: such a call did not run)."""
        try:
            return flatten(self._arguments(nature, target, payload))
        except ArgumentsRefused:
            return None

    def _lineage(self, agent: str) -> list[str]:
        """The agents upstream of ``agent``, transitively, each before the agents that depend on it."""
        known = {spec.id: spec for spec in self.workflow.agents}
        ordered: list[str] = []
        pending = [(agent, False)]
        while pending:
            current, expanded = pending.pop()
            if expanded:
                if current != agent and current not in ordered:
                    ordered.append(current)
                continue
            pending.append((current, True))
            spec = known.get(current)
            for upstream in reversed(spec.depends_on if spec is not None else []):
                if upstream not in ordered:
                    pending.append((upstream, False))
        return ordered

    @staticmethod
    def _arguments(nature: Nature, target: str, payload: str) -> dict[str, Any]:
        """The arguments as the tool receives them: an MCP tool's JSON object (as ``McpTools.execute`` reads it),
        else the call's ``target`` and ``payload``."""
        if nature.is_mcp:
            text = payload if payload.strip().startswith("{") else target
            try:
                parsed = json.loads(text or "{}")
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return parsed
        found = {key: value for key, value in (("target", target), ("payload", payload)) if value}
        resolved = posixpath.normpath(target) if target and not nature.is_mcp else target
        if resolved != target and resolved not in (".", ""):  # ./pwned.sh is pwned.sh: judged as both
            found["resolved"] = resolved
        return found
