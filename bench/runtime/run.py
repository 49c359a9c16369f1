"""The runtime's own overhead: scheduling per node with an instant agent, events per second into SQLite, resume
time after a restart — next to a plain asyncio scheduler running the same DAG with no store and no guards.

    python bench/runtime/run.py [--rounds 3]   # 1,000-node DAGs, groundstate, LangGraph and DBOS alternating
    python bench/runtime/run.py --quick        # 100 nodes, a smoke test

LangGraph's ``SqliteSaver`` runs at the event store's durability (WAL, ``synchronous=NORMAL``): equal fsync policy,
so the ratio compares the work, not the disk.

The instant agent is a Backend that answers every request at once with a valid envelope (no model), so what is
measured is everything groundstate does around an invocation: the event log, the guard kernel at pre-flight and
post-flight, the packet gate, the agent's kernel, the recording.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from groundstate import long_lived
from groundstate.runtime import AgentStarted, NodeCreated, RunStarted, ToolCall, ToolResult
from groundstate.runtime.backends import Piece
from groundstate.runtime.runner import Runtime
from groundstate.runtime.store import EventStore
from groundstate.wire.vocab import ByteVocabulary, Vocabulary

ANSWER = json.dumps({"control_packet": {"intent_classification": {"category": "/query", "verb": "/write",
                                                                  "confidence": 1.0},
                                        "mangle_updates": [], "memory_operations": [], "tool_requests": []},
                     "surface_response": "Done. [STATUS: SUCCESS]"})  # fmt: skip


class InstantBackend:
    name = "instant"
    vocabulary: Vocabulary = ByteVocabulary()

    async def stream(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> AsyncIterator[Piece]:
        yield Piece(ANSWER)


def layered(nodes: int, width: int = 10) -> str:
    """``nodes`` writer agents in layers of ``width``; each depends on one agent of the layer before."""
    lines = ["name: layered", "agents:"]
    for i in range(nodes):
        lines += [f"  - id: writer_{i}", "    instructions: write"]
        if i >= width:
            lines.append(f"    depends_on: [writer_{i - width}]")
    return "\n".join(lines) + "\n"


async def asyncio_peer(nodes: int, width: int = 10) -> None:
    """The same DAG as plain asyncio tasks awaiting their dependency: the floor for any scheduler."""
    tasks: dict[int, asyncio.Task[None]] = {}

    async def node(i: int) -> None:
        if i >= width:
            await tasks[i - width]
        await asyncio.sleep(0)

    for i in range(nodes):
        tasks[i] = asyncio.create_task(node(i))
    await asyncio.gather(*tasks.values())


def langgraph_peer(nodes: int, folder: Path, checkpointed: bool, width: int = 10) -> tuple[float, float, int]:
    """The same DAG as a LangGraph graph — one node per agent, an edge from its dependency, every node appending its
    name to the state — with ``SqliteSaver`` (a checkpoint per superstep, in SQLite) or no checkpointer: the seconds
    its ``compile()`` took, the seconds its ``invoke()`` took, and how many nodes ran (checked against ours). The
    graph's definition (``add_node``/``add_edge``, the counterpart of our ``create``) is not timed, nor are the
    imports (``main`` imports LangGraph before anything is timed: its import alone takes ~0.6 s)."""
    import operator
    import sqlite3
    from typing import Annotated, TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, StateGraph

    # the functional form: its annotation is evaluated now (this module postpones annotations; LangGraph reads them)
    state = TypedDict("state", {"done": Annotated[list[str], operator.add]})  # type: ignore[misc]  # noqa: UP013
    graph = StateGraph(state)
    for i in range(nodes):
        name = f"writer_{i}"
        graph.add_node(name, lambda _state, name=name: {"done": [name]})
        graph.add_edge(f"writer_{i - width}" if i >= width else START, name)
    saver = None
    if checkpointed:  # at our durability: WAL with synchronous=NORMAL, as the event store runs (equal work)
        (folder / "langgraph.db").unlink(missing_ok=True)
        connection = sqlite3.connect(str(folder / "langgraph.db"), check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        saver = SqliteSaver(connection)
    started = time.perf_counter()
    app = graph.compile(checkpointer=saver)
    compiled = time.perf_counter()
    final = app.invoke({"done": []}, {"configurable": {"thread_id": "bench"}, "recursion_limit": nodes + 10})
    return compiled - started, time.perf_counter() - compiled, len(set(final["done"]))


class DbosPeer:
    """The same DAG's nodes as the steps of one DBOS Transact workflow (``dbos`` on PyPI), its system database in
    SQLite at the event store's settings (WAL, ``synchronous=NORMAL``; DBOS leaves SQLite's defaults, a rollback
    journal with a full sync, so both are set on each of its connections): each step's output checkpointed in its
    own transaction, as each of our agents' events is. Steps run in the DAG's order (a DBOS workflow is sequential
    code; with an instant agent the DAG's parallelism buys nothing here either)."""

    def __init__(self, folder: Path) -> None:
        import sqlite3

        from dbos import DBOS
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        def equal_durability(connection: Any, _record: Any) -> None:
            if isinstance(connection, sqlite3.Connection):
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")

        event.listen(Engine, "connect", equal_durability)  # every engine created from now on: DBOS's
        DBOS(config={"name": "bench-runtime", "system_database_url": f"sqlite:///{folder / 'dbos.sqlite'}",
                     "run_admin_server": False})  # fmt: skip

        @DBOS.step()
        def node(i: int) -> int:
            return i

        @DBOS.workflow()
        def dag(nodes: int) -> int:
            return sum(1 for i in range(nodes) if node(i) == i)

        self.dag = dag
        DBOS.launch()
        self.stop = DBOS.destroy

    def run(self, nodes: int) -> tuple[float, int]:
        """The seconds one workflow of ``nodes`` steps took, and how many steps ran (checked against ours)."""
        started = time.perf_counter()
        ran = self.dag(nodes)
        return time.perf_counter() - started, ran


def store_figures(store: EventStore, run_id: str, events: int, quick: bool) -> None:
    """Events per second into SQLite (one transaction each), and the replay of the measured run by a fresh store."""
    other = store.create_run("bench", "name: bench\nagents:\n  - id: writer_0\n    instructions: x\n", None)
    store.append(other, NodeCreated(agent="writer_0"))
    store.append(other, RunStarted())
    store.append(other, AgentStarted(attempt=1), "writer_0")  # the events a running agent's calls make
    count = 2000 if quick else 10000
    started = time.perf_counter()
    for i in range(count // 2):
        call = store.append(other, ToolCall(tool="web_search", target=str(i), payload=""), "writer_0")
        store.append(other, ToolResult(call=call.seq, tool="web_search", decision="/permit", status="/success",
                                       output=""), "writer_0")  # fmt: skip
    rate = count / (time.perf_counter() - started)
    print(f"events into SQLite      {rate:8.0f} events/s (one transaction each, WAL)")

    fresh = EventStore(store.url)  # a restarted process: no cache
    started = time.perf_counter()
    replayed = fresh.state(run_id)
    resume = time.perf_counter() - started
    print(f"resume (replay {len(replayed.nodes)} nodes, {events} events)   {resume * 1000:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of groundstate and LangGraph")
    parser.add_argument("--no-freeze", action="store_true", help="leave the garbage collector as Python starts it")
    args = parser.parse_args()
    nodes = 100 if args.quick else 1000
    print(f"python {sys.version.split()[0]} on {platform.machine()}, {nodes}-node layered DAG (10 wide)")
    import langgraph.checkpoint.sqlite  # the peer's imports, before anything is timed
    import langgraph.graph  # noqa: F401

    if not args.no_freeze:  # as `groundstate run` does once started: for every row, the peers' too (one process)
        long_lived.started()

    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        dbos = DbosPeer(home)
        ratios, dbos_ratios = [], []
        for number in range(1, args.rounds + 1):  # alternating: each ratio is within one round, the spread shown
            store = EventStore(f"sqlite:///{home / f'bench-{number}.db'}")
            runtime = Runtime(store, home, backend=InstantBackend(), concurrency=10)
            started = time.perf_counter()
            run_id = runtime.create(layered(nodes), "layered.yaml", "instant")
            created = time.perf_counter() - started
            started = time.perf_counter()
            state = asyncio.run(runtime.drive(run_id))
            elapsed = time.perf_counter() - started
            assert state.status == "completed", state.status
            events = len(store.events(run_id))
            print(f"round {number}: groundstate runtime     {elapsed:8.2f} s   {elapsed / nodes * 1000:7.2f} ms/node   "
                  f"{events} events (drive; the run's creation before it: {created * 1000:.0f} ms)")  # fmt: skip
            for checkpointed in (True, False):  # LangGraph in the same round, on the same DAG
                compiling, invoking, ran = langgraph_peer(nodes, home, checkpointed)
                assert ran == nodes, f"LangGraph ran {ran} of {nodes} nodes"
                seconds = compiling + invoking
                label = "LangGraph + SqliteSaver (WAL, NORMAL)" if checkpointed else "LangGraph, no saver"
                print(f"round {number}: {label:<37} {seconds:8.2f} s   {seconds / nodes * 1000:7.2f} ms/node   "
                      f"groundstate is {elapsed / seconds:.2f}x its time (compile {compiling * 1000:.0f} ms + invoke)")
                if checkpointed:
                    ratios.append(elapsed / seconds)
            seconds, ran = dbos.run(nodes)  # DBOS in the same round, the same number of durable steps
            assert ran == nodes, f"DBOS ran {ran} of {nodes} steps"
            dbos_ratios.append(elapsed / seconds)
            print(f"round {number}: {'DBOS Transact, SQLite (WAL, NORMAL)':<37} {seconds:8.2f} s   "
                  f"{seconds / nodes * 1000:7.2f} ms/step   groundstate is {elapsed / seconds:.2f}x its time")
        print(f"groundstate / LangGraph+SqliteSaver at equal durability: {min(ratios):.2f}x to {max(ratios):.2f}x "
              f"over {len(ratios)} rounds (median {sorted(ratios)[len(ratios) // 2]:.2f}x)")
        print(f"groundstate per node / DBOS per step at equal durability: {min(dbos_ratios):.2f}x to "
              f"{max(dbos_ratios):.2f}x (median {sorted(dbos_ratios)[len(dbos_ratios) // 2]:.2f}x)")
        dbos.stop()

        started = time.perf_counter()
        asyncio.run(asyncio_peer(nodes))
        peer = time.perf_counter() - started
        print(f"plain asyncio (peer)    {peer:8.4f} s   {peer / nodes * 1000:7.4f} ms/node   no store, no guards")

        store_figures(store, run_id, events, args.quick)

if __name__ == "__main__":
    main()
