"""Workflows: a DAG of agents described in YAML, validated with errors that say what is wrong and where.

```yaml
name: market-brief
agents:
  - id: research_market          # the prefix is the role: research_, analyze_, coder_, writer_
    instructions: Find the 2025 market size for home batteries.
    tools: [web_search]
  - id: writer_brief
    instructions: Write a three-sentence brief from the research.
    depends_on: [research_market]
```
"""

from __future__ import annotations

import functools
import heapq
import re
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from .. import tools as python_tools
from ..errors import ConfigurationError
from .state import RunState

# libyaml's safe loader where PyYAML was built with it (ten times the pure-Python one on a 1,000-agent workflow);
# the same documents, the same errors with their line and column
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
TOOLS = ("web_search", "execute_python", "read_file", "write_file", "list_files", "delete_file")


class Role(BaseModel):
    """A role: the id prefix of its agents and the tools they must really execute (asserted as ``mandatory_tool``
    facts for the guards — the only place a role's duties are written)."""

    model_config = ConfigDict(extra="forbid")

    prefix: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    mandatory_tools: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]] = Field(default_factory=list)
    description: str = ""


DEFAULT_ROLES = [
    Role(prefix="research_", mandatory_tools=["web_search"], description="verifies facts with web_search"),
    Role(prefix="analyze_", mandatory_tools=["execute_python"], description="computes with execute_python"),
    Role(prefix="coder_", mandatory_tools=["execute_python"], description="writes and runs code"),
    Role(prefix="writer_", mandatory_tools=[], description="writes from its context"),
]


class AgentSpec(BaseModel):
    """One agent of a workflow: id (prefixed by its role), instructions, tools, dependencies."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    instructions: str = Field(min_length=1)
    tools: list[str] = Field(default_factory=list)  # built-in, your own (@groundstate.tool), mcp:SERVER/TOOL
    depends_on: list[str] = Field(default_factory=list)
    model: str | None = None  # None: the workflow's (or the run's) model

    @property
    def agent_tools(self) -> list[str]:
        """The tools under the names the agent and its kernel use (``SERVER__TOOL`` for MCP tools)."""
        return [agent_tool_name(tool) for tool in self.tools]

    @field_validator("depends_on")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("lists an agent twice")
        return value


class Workflow(BaseModel):
    """A workflow: its roles and agents (a DAG, checked when parsed)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    model: str | None = None
    roles: list[Role] = Field(default_factory=lambda: list(DEFAULT_ROLES))
    agents: list[AgentSpec] = Field(min_length=1)
    _index: dict[str, AgentSpec] = PrivateAttr(default_factory=dict)
    _order: list[str] = PrivateAttr(default_factory=list)

    def agent(self, agent_id: str) -> AgentSpec:
        """The agent with id ``agent_id`` (KeyError if there is none)."""
        if len(self._index) != len(self.agents):  # agents can be added (SpawnAgent): rebuild
            self._index = {a.id: a for a in self.agents}
        return self._index[agent_id]

    def role(self, agent_id: str) -> Role | None:
        """The role whose prefix starts ``agent_id``, or None."""
        return next((r for r in self.roles if agent_id.startswith(r.prefix)), None)

    def order(self) -> list[str]:
        """The agents in a dependency order (each after everything it depends on), stable by file order."""
        if len(self._order) == len(self.agents):
            return self._order
        position = {a.id: i for i, a in enumerate(self.agents)}
        waiting = {a.id: len(a.depends_on) for a in self.agents}
        dependants: dict[str, list[str]] = {a.id: [] for a in self.agents}
        for a in self.agents:
            for dependency in a.depends_on:
                dependants[dependency].append(a.id)
        ready = [position[a] for a, n in waiting.items() if n == 0]
        heapq.heapify(ready)
        done: list[str] = []
        while ready:  # Kahn's algorithm, always taking the earliest agent of the file that is ready
            agent = self.agents[heapq.heappop(ready)].id
            done.append(agent)
            for dependant in dependants[agent]:
                waiting[dependant] -= 1
                if waiting[dependant] == 0:
                    heapq.heappush(ready, position[dependant])
        self._order = done
        return done


class WorkflowError(ConfigurationError, ValueError):
    """Everything wrong with a workflow file, one problem per line."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source, self.problems = source, problems
        super().__init__("\n".join(f"{source}: {p}" for p in problems))


def load_workflow(path: str | Path, roles: list[Role] | None = None) -> Workflow:
    """The workflow in the YAML file at ``path`` (``roles``: as for parse_workflow)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkflowError(str(path), [f"cannot read the file: {exc.strerror}"]) from None
    return parse_workflow(text, str(path), roles=roles)


MCP_TOOL = re.compile(r"^mcp:([a-z][a-z0-9_]*)/([A-Za-z0-9_.\-]{1,64})$")


def is_mcp_tool(ref: str) -> bool:
    """Whether a workflow's tool entry names an MCP tool (``mcp:SERVER/TOOL``)."""
    return MCP_TOOL.fullmatch(ref) is not None


def agent_tool_name(ref: str) -> str:
    """The name an agent (and its kernel) uses for a workflow's tool entry: an MCP tool's is ``SERVER__TOOL``
    (lowercase, other characters as ``_``), as the guard lists it; others keep theirs."""
    found = MCP_TOOL.fullmatch(ref)
    if found is None:
        return ref
    return f"{found[1]}__{re.sub(r'[^a-z0-9_]', '_', found[2].lower())}"


def parse_workflow(
    text: str, source: str = "<workflow>", tools: tuple[str, ...] = TOOLS, roles: list[Role] | None = None
) -> Workflow:
    """The workflow in ``text``, checked (schema, roles, tools, dependencies, cycles); WorkflowError lists
    every problem, each naming the agent. ``roles`` are the roles of a workflow that declares none (the project
    configuration's; default: the shipped roles)."""
    try:
        data: Any = _loaded(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise WorkflowError(source, [f"{where}not valid YAML: {getattr(exc, 'problem', exc)}"]) from None
    if not isinstance(data, dict):
        raise WorkflowError(source, ["a workflow is a mapping with 'name' and 'agents'"])
    if roles is not None and "roles" not in data:
        data = {**data, "roles": [role.model_dump() for role in roles]}
    try:
        workflow = Workflow.model_validate(data)
    except ValidationError as exc:
        raise WorkflowError(source, [_describe(data, e) for e in exc.errors()]) from None
    problems = _graph_problems(workflow, tools)
    if problems:
        raise WorkflowError(source, problems)
    return workflow


@functools.lru_cache(maxsize=64)
def _loaded(text: str) -> Any:
    """The YAML document of ``text``, loaded once per process: a run's workflow is read again by every segment
    that drives it (50 ms for a thousand agents). Never changed by its readers (validation builds new models)."""
    return yaml.load(text, Loader=SAFE_LOADER)


def workflow_of(state: RunState) -> Workflow:
    """The run's workflow as it stands: the YAML it was started with, plus every agent a cortex pattern spawned."""
    pinned = (state.policy or {}).get("roles")  # the configuration's roles, pinned when the run was created
    roles = [Role.model_validate(r) for r in pinned] if pinned is not None else None
    workflow = parse_workflow(state.workflow, state.run_id, roles=roles)
    for spec in state.spawned:
        workflow.agents.append(AgentSpec.model_validate(spec))
    return workflow


def _describe(data: dict[str, Any], error: Any) -> str:
    location = list(error["loc"])
    where = ".".join(str(p) for p in location)
    if len(location) >= 2 and location[0] == "agents" and isinstance(location[1], int):
        agents = data.get("agents") or []
        agent_id = agents[location[1]].get("id") if location[1] < len(agents) and isinstance(
            agents[location[1]], dict) else None  # fmt: skip
        where = f"agent {agent_id!r}" + ("." + ".".join(str(p) for p in location[2:]) if location[2:] else "")
    return f"{where}: {error['msg']}"


def _graph_problems(workflow: Workflow, tools: tuple[str, ...]) -> list[str]:
    """Every problem of the agents as a whole (duplicates, unknown dependencies, tools, roles), then a cycle."""
    problems: list[str] = []
    counted = Counter(a.id for a in workflow.agents)  # (once: a workflow can have thousands of agents)
    for duplicate in sorted(i for i, n in counted.items() if n > 1):
        problems.append(f"agent {duplicate!r} is defined more than once")
    known, known_tools = set(counted), [*tools, *python_tools.REGISTRY]  # the built-in tools and your own
    for agent in workflow.agents:
        problems += _agent_problems(workflow, agent, known, known_tools)
    if not problems:
        cycle = _cycle(workflow)
        if cycle:
            problems.append("the agents depend on each other in a cycle: " + " -> ".join(cycle))
    return problems


def _agent_problems(workflow: Workflow, agent: AgentSpec, known: set[str], known_tools: list[str]) -> list[str]:
    """One agent's problems: its dependencies, its tools (``known_tools``: the built-in ones and your own, from
    ``@groundstate.tool``), its role and the tools that role needs."""
    problems: list[str] = []
    for dependency in agent.depends_on:
        if dependency not in known:
            problems.append(f"agent {agent.id!r}: depends_on {dependency!r}, which is not an agent of the workflow")
        elif dependency == agent.id:
            problems.append(f"agent {agent.id!r} depends on itself")
    problems += [f"agent {agent.id!r}: unknown tool {tool!r} (known: {', '.join(known_tools)}, or mcp:SERVER/TOOL)"
                 for tool in agent.tools if tool not in known_tools and not is_mcp_tool(tool)]  # fmt: skip
    role = workflow.role(agent.id)
    if role is None:
        prefixes = ", ".join(r.prefix for r in workflow.roles)
        problems.append(f"agent {agent.id!r}: its id must start with a role prefix ({prefixes})")
        return problems
    problems += [f"agent {agent.id!r}: the {role.prefix} role needs the tool {tool!r}"
                 for tool in role.mandatory_tools if tool not in agent.tools]  # fmt: skip
    return problems


def _cycle(workflow: Workflow) -> list[str] | None:
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dependency in workflow.agent(node).depends_on:
            if state.get(dependency) == 1:
                return [*stack[stack.index(dependency) :], dependency]
            if dependency not in state:
                found = visit(dependency)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for agent in workflow.agents:
        if agent.id not in state:
            found = visit(agent.id)
            if found:
                return found
    return None
