"""Agents that finish in the same turn of the event loop share one transaction (runtime/turn_batch.py): the events
are those each would have written alone, the run's budgets count what the turn has not written yet, an event the
store refuses fails only the agent that sent it, and a cortex pattern that listens for completions still sees each
one at once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundstate.config import load_config
from groundstate.runtime import (
    AgentCompleted,
    AgentStarted,
    EventRefused,
    EventStore,
    NodeCreated,
    Piece,
    RunStarted,
    Runtime,
    body_of,
)
from groundstate.runtime.turn_batch import Item, TurnBatch
from groundstate.wire import ByteVocabulary, Vocabulary

from .conftest import envelope
from .test_deferred_starts import event_writes

WIDE = """name: wide
agents:
  - id: writer_a
    instructions: Write a.
  - id: writer_b
    instructions: Write b.
  - id: writer_c
    instructions: Write c.
"""


class AtOnce:
    """A model that answers at once, in-process, each answer costing ``usage`` tokens (in, out)."""

    name = "at-once"
    vocabulary: Vocabulary = ByteVocabulary()

    def __init__(self, usage: tuple[int, int] | None = None) -> None:
        self.usage = usage

    async def stream(
        self, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float | None = None
    ) -> AsyncIterator[Piece]:
        yield Piece(json.dumps(envelope("Done. [STATUS: SUCCESS]")), usage=self.usage)


def wide_runtime(tmp_path: Path, backend: AtOnce, toml: str = "", **options: Any) -> Runtime:
    path = tmp_path / "groundstate.toml"
    path.write_text(toml)
    store = EventStore(f"sqlite:///{tmp_path / 'gs.db'}")
    return Runtime(store, tmp_path / "home", backend=backend, concurrency=3, settings=load_config(path).config,
                   **options)  # fmt: skip


def test_agents_finishing_in_one_turn_are_written_in_one_transaction(tmp_path: Path) -> None:
    runtime = wide_runtime(tmp_path, AtOnce())
    writes = event_writes(runtime.store)  # before the store's first connection
    run_id = runtime.create(WIDE, "wide.yaml")
    writes.clear()  # the run's creation
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    assert writes == [1, 6, 1]  # RunStarted; three starts and completions together; RunCompleted
    log = [(e.type, e.agent) for e in runtime.store.events(run_id) if e.type.startswith("Agent")]
    assert log == [(kind, agent) for agent in ("writer_a", "writer_b", "writer_c")
                   for kind in ("AgentStarted", "AgentCompleted")]  # fmt: skip


def test_a_budget_counts_the_usage_of_agents_finishing_in_the_same_turn(tmp_path: Path) -> None:
    """500 tokens each, a budget of 1,200: the third to finish takes the run past it, although neither of the other
    two completions is in the log when it is judged (they are written at the end of the turn)."""
    runtime = wide_runtime(tmp_path, AtOnce(usage=(300, 200)), "[budgets]\nmax_tokens = 1200\n")
    run_id = runtime.create(WIDE, "wide.yaml")
    state = asyncio.run(runtime.drive(run_id))
    assert state.pause is not None and state.pause.agent == "writer_c"
    assert state.pause.reason == "The run's token budget is spent: 1500 tokens used of 1200."
    assert [state.nodes[a].status for a in ("writer_a", "writer_b")] == ["succeeded", "succeeded"]
    assert state.usage["input_tokens"] == 900 and state.usage["output_tokens"] == 600


def test_an_event_the_store_refuses_fails_only_its_own_agent(tmp_path: Path) -> None:
    store = EventStore(f"sqlite:///{tmp_path / 'gs.db'}")
    run_id = store.create_run("wide", WIDE, None)
    for agent in ("writer_a", "writer_b"):
        store.append(run_id, NodeCreated(agent=agent))
    store.append(run_id, RunStarted())
    store.append(run_id, AgentStarted(attempt=1), "writer_a")
    observed: list[tuple[str, str | None]] = []
    batch = TurnBatch(lambda items: store.transact(run_id, lambda _: items),
                      lambda event: observed.append((event.type, event.agent)))  # fmt: skip
    done = AgentCompleted(output="x", status_tag="success")

    async def both() -> tuple[Any, ...]:
        return await asyncio.gather(batch.append([(done, "writer_a")]),
                                    batch.append([(done, "writer_b")]),  # never started
                                    return_exceptions=True)  # fmt: skip

    written, refused = asyncio.run(both())
    assert [(e.type, e.agent) for e in written] == [("AgentCompleted", "writer_a")]
    assert isinstance(refused, EventRefused) and "writer_b" in str(refused)
    assert observed == [("AgentCompleted", "writer_a")]  # a refused event is neither written nor reported
    state = EventStore(store.url).state(run_id)
    assert (state.nodes["writer_a"].status, state.nodes["writer_b"].status) == ("succeeded", "pending")


def test_a_pattern_listening_for_completions_gets_each_written_at_once(tmp_path: Path) -> None:
    patterns = tmp_path / "patterns.json"
    patterns.write_text(json.dumps([{"id": "note_completions", "name": "Completions", "trigger_event":
                                     "AgentCompleted", "condition": 'Agent = "nobody"',
                                     "action": {"Interrupt": {"reason": "never"}}}]))  # fmt: skip
    runtime = wide_runtime(tmp_path, AtOnce(), patterns_path=patterns)
    writes = event_writes(runtime.store)  # before the store's first connection
    run_id = runtime.create(WIDE, "wide.yaml")
    writes.clear()  # the run's creation
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    assert writes == [1, 2, 2, 2, 1]  # each agent's start and completion, before the next agent's decision


@pytest.mark.parametrize("failing", [False, True])
def test_the_batch_never_raises_into_the_loop(tmp_path: Path, failing: bool) -> None:
    """Whatever the write does, the flush settles every future and raises nothing (it runs as a loop callback)."""

    def write(items: list[Any]) -> list[Any]:
        if failing:
            raise OSError("disk gone")
        return [f"event {i}" for i, _ in enumerate(items)]

    batch = TurnBatch(write, lambda _event: None)

    async def two() -> tuple[Any, ...]:
        return await asyncio.gather(batch.append([(RunStarted(), None)]), batch.append([(RunStarted(), None)]),
                                    return_exceptions=True)  # fmt: skip

    results = asyncio.run(two())
    if failing:
        assert all(isinstance(r, OSError) for r in results)
    else:
        assert list(results) == [["event 0"], ["event 1"]]  # each agent's own events, from the one write


AGENTS = ["writer_a", "writer_b", "writer_c"]
KINDS = ["AgentStarted", "AgentCompleted", "AgentFailed", "ToolCall"]


def payload_of(kind: str) -> dict[str, Any]:
    payloads: dict[str, dict[str, Any]] = {
        "AgentStarted": {"attempt": 1},
        "AgentCompleted": {"output": "x", "status_tag": "success"},
        "AgentFailed": {"error": "e", "output": ""},
        "ToolCall": {"tool": "web_search", "target": "t", "payload": ""},
    }
    return payloads[kind]


def always(events: list[Item]) -> Callable[[object], list[Item]]:
    """A transaction's builder that appends ``events`` whatever the state."""
    return lambda _state: events


def fresh_run(path: Path) -> tuple[EventStore, str]:
    store = EventStore(f"sqlite:///{path}")
    run_id = store.create_run("wide", WIDE, None, run_id="run-1")
    for agent in AGENTS:
        store.append(run_id, NodeCreated(agent=agent))
    store.append(run_id, RunStarted())
    return store, run_id


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(AGENTS)), min_size=1, max_size=3),
                min_size=1, max_size=6))  # fmt: skip
def test_a_turn_writes_and_tells_what_one_transaction_per_agent_would(
    tmp_path_factory: pytest.TempPathFactory, queued: list[list[tuple[str, str]]]
) -> None:
    """Any turn — each entry one agent's events, some of which the state machines refuse — ends with the same log,
    and each agent learns the same outcome (its events, or the error), as writing each entry alone, in order."""
    folder = tmp_path_factory.mktemp("turn")
    alone, alone_run = fresh_run(folder / "alone.db")
    expected: list[Any] = []
    for items in queued:
        events: list[Item] = [(body_of(k, payload_of(k)), a) for k, a in items]
        try:
            written = alone.transact(alone_run, always(events))
            expected.append([(e.seq, e.type, e.agent) for e in written])
        except Exception as exc:  # what the agent would have been told
            expected.append(type(exc))
    batched, batched_run = fresh_run(folder / "batched.db")
    observed: list[int] = []
    batch = TurnBatch(lambda items: batched.transact(batched_run, lambda _: items), lambda e: observed.append(e.seq))

    async def one_turn() -> list[Any]:
        return await asyncio.gather(*(batch.append([(body_of(k, payload_of(k)), a) for k, a in items])
                                      for items in queued), return_exceptions=True)  # fmt: skip

    told = [
        r if isinstance(r, BaseException) else [(e.seq, e.type, e.agent) for e in r] for r in asyncio.run(one_turn())
    ]
    assert [type(t) if isinstance(t, BaseException) else t for t in told] == expected
    log = [(e.seq, e.type, e.agent, e.payload) for e in EventStore(batched.url).events(batched_run)]
    assert log == [(e.seq, e.type, e.agent, e.payload) for e in EventStore(alone.url).events(alone_run)]
    assert observed == [seq for t in told if not isinstance(t, BaseException) for seq, _, _ in t]
