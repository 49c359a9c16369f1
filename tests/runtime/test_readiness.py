"""The driver's incremental readiness equals the definition — pending, no live task, every upstream agent succeeded
or skipped, in the workflow's order — after any sequence of the node state machine's transitions, live tasks
coming and going, and agents added while the run is driven."""

from __future__ import annotations

import asyncio
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.runtime import NODE_EDGES, AgentSpec, Invocation, NodeStatus, Workflow
from groundstate.runtime.readiness import Readiness


class Live:
    """A task of the driver's, finished or not (all the readiness asks of one)."""

    def __init__(self, finished: bool) -> None:
        self.finished = finished

    def done(self) -> bool:
        return self.finished


def defined(workflow: Workflow, nodes: dict[str, Invocation], tasks: dict[str, Live]) -> list[str]:
    """Readiness as the driver defined it before it was incremental: every agent looked at, every time."""
    return [
        agent
        for agent in workflow.order()
        if agent in nodes
        and nodes[agent].status == NodeStatus.PENDING
        and not (agent in tasks and not tasks[agent].done())
        and all(nodes[u].status in (NodeStatus.SUCCEEDED, NodeStatus.SKIPPED) for u in workflow.agent(agent).depends_on)
    ]


def spec(number: int, picks: list[int]) -> AgentSpec:
    upstream = sorted({f"a{p % number}" for p in picks}) if number else []
    return AgentSpec(id=f"a{number}", instructions="x", depends_on=upstream)


steps = st.one_of(
    st.tuples(st.just("move"), st.integers(min_value=0), st.integers(min_value=0)),
    st.tuples(st.just("task"), st.integers(min_value=0), st.booleans()),
    st.tuples(st.just("spawn"), st.lists(st.integers(min_value=0), max_size=3), st.just(0)),
    st.tuples(st.just("restart"), st.integers(min_value=0), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(min_value=0), max_size=3), min_size=1, max_size=12), st.lists(steps, max_size=60))
def test_incremental_readiness_is_the_definition(shape: list[list[int]], script: list[tuple[object, ...]]) -> None:
    workflow = Workflow(name="w", agents=[spec(i, picks) for i, picks in enumerate(shape)])
    nodes = {a.id: Invocation(a.id) for a in workflow.agents}
    tasks: dict[str, Live] = {}
    readiness = Readiness()
    for kind, first, second in script:
        agents = [a.id for a in workflow.agents]
        if kind == "move":  # any edge the state machine has from the agent's status
            node = nodes[agents[cast(int, first) % len(agents)]]
            edges = list(NODE_EDGES[node.status].values())
            if edges:
                node.status = edges[cast(int, second) % len(edges)]
        elif kind == "task":
            tasks[agents[cast(int, first) % len(agents)]] = Live(cast(bool, second))
        elif kind == "restart":  # RunResumed: an interrupted running agent is pending again
            node = nodes[agents[cast(int, first) % len(agents)]]
            if node.status == NodeStatus.RUNNING:
                node.status = NodeStatus.PENDING
        else:  # a cortex pattern spawns an agent (NodeCreated comes with it)
            added = spec(len(agents), cast(list[int], first))
            workflow.agents.append(added)
            nodes[added.id] = Invocation(added.id)
        live = cast(dict[str, asyncio.Task[None]], tasks)
        assert readiness.ready(workflow, nodes, live) == defined(workflow, nodes, tasks)


def test_a_long_chain_is_not_looked_at_whole_each_time() -> None:
    """In a 2,000-agent chain, each call looks only at the agents that can have changed: after the first call, one
    agent is active and one blocker is parked (the definition would look at all 2,000 every time)."""
    workflow = Workflow(name="w", agents=[spec(i, [i - 1] if i else []) for i in range(2000)])
    nodes = {a.id: Invocation(a.id) for a in workflow.agents}
    readiness = Readiness()
    for i in range(2000):
        assert readiness.ready(workflow, nodes, {}) == [f"a{i}"]
        assert len(readiness._active) == 1 and sum(map(len, readiness._parked.values())) == 1999 - i
        nodes[f"a{i}"].status = NodeStatus.SUCCEEDED
