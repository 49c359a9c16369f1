"""Agents' memory operations in runs: a run's notes reach its later agents; long-term and vector entries, kept in
the store's database, reach the next run's agents; a guard sees each write before it is applied, and a paused
attempt writes nothing; the [memory] keys change what is kept and shown."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from groundstate.config import ProjectConfig
from groundstate.runtime import EventStore, Runtime

from .conftest import Script, envelope, sse

TWO = """
name: mem
agents:
  - id: writer_a
    instructions: Note what matters about lithium.
  - id: writer_b
    instructions: Write the lithium brief.
    depends_on: [writer_a]
"""
WRITES = [
    {"op": "promote_to_long_term", "key": "preference:style", "value": "concise"},
    {"op": "store_vector", "key": "fact:lithium", "value": "Lithium carbonate costs 11,000 USD/t"},
    {"op": "note", "key": "draft", "value": "v1 is in draft.md"},
]


def runtime_on(url: str, database: str, home: Path, **memory: Any) -> Runtime:
    settings = ProjectConfig.model_validate({"models": {"default": f"openai-chat:m@{url}"}, "memory": memory})
    return Runtime(EventStore(database), home, settings=settings)


def prompt_of(script: Script, agent: str, index: int = -1) -> str:
    bodies = [body for a, body in script.requests if a == agent]
    return str(bodies[index]["messages"][1]["content"])


def remember_and_recall(url: str, script: Script, database: str, home: Path) -> None:
    """Run 1 writes memory; run 2's first agent is shown it."""
    script.answers = {"writer_a": [envelope("Noted. [STATUS: SUCCESS]", memory_operations=WRITES)],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    first = runtime_on(url, database, home)
    run_id = first.create(TWO, "mem.yaml")
    assert asyncio.run(first.drive(run_id)).status == "completed"
    completed = next(e for e in first.store.events(run_id) if e.type == "AgentCompleted")
    assert [m["op"] for m in completed.payload["memory"]] == ["promote_to_long_term", "store_vector", "note"]
    assert "- draft: v1 is in draft.md" in prompt_of(script, "writer_b")  # the run's note, for its later agent
    second = runtime_on(url, database, home)  # another process, the same store
    assert asyncio.run(second.drive(second.create(TWO, "mem.yaml"))).status == "completed"
    later = prompt_of(script, "writer_a")
    assert "- preference:style: concise" in later and "- fact:lithium: Lithium carbonate costs 11,000 USD/t" in later
    assert "draft" not in later  # notes belong to their run


def test_memory_persists_across_runs_on_sqlite(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    remember_and_recall(url, script, f"sqlite:///{tmp_path / 'mem.db'}", tmp_path / "home")


def test_a_guard_sees_memory_writes_and_a_paused_attempt_writes_nothing(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    guards = tmp_path / "memory.mg"
    guards.write_text('needs_approval(R, A, /safety, "no long-term memory") :- '
                      'memory_write(R, A, /promote_to_long_term, _, _).\n')  # fmt: skip
    script.answers = {"writer_a": [envelope("Noted. [STATUS: SUCCESS]", memory_operations=WRITES)],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    database = f"sqlite:///{tmp_path / 'g.db'}"
    settings = ProjectConfig.model_validate({"models": {"default": f"openai-chat:m@{url}"},
                                             "policy": {"guards": [guards]}})  # fmt: skip
    guarded = Runtime(EventStore(database), tmp_path / "home", settings=settings)
    state = asyncio.run(guarded.drive(guarded.create(TWO, "mem.yaml")))
    assert state.pause is not None and state.pause.reason == "no long-term memory"
    plain = runtime_on(url, database, tmp_path / "home")
    assert asyncio.run(plain.drive(plain.create(TWO, "mem.yaml"))).status == "completed"
    assert "preference:style" not in prompt_of(script, "writer_a") and "fact:lithium" not in prompt_of(
        script, "writer_a"
    )


def test_long_term_off_keeps_notes_only_and_recall_zero_shows_nothing(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Noted. [STATUS: SUCCESS]", memory_operations=WRITES)],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    database, home = f"sqlite:///{tmp_path / 'o.db'}", tmp_path / "home"
    off = runtime_on(url, database, home, long_term=False)
    assert asyncio.run(off.drive(off.create(TWO, "mem.yaml"))).status == "completed"
    assert "- draft: v1 is in draft.md" in prompt_of(script, "writer_b")  # notes still work
    on = runtime_on(url, database, home)
    asyncio.run(on.drive(on.create(TWO, "mem.yaml")))
    assert "preference:style" not in prompt_of(script, "writer_a")  # nothing was kept by the first run
    hidden = runtime_on(url, database, home, recall=0)  # the second run kept them; recall 0 shows none
    asyncio.run(hidden.drive(hidden.create(TWO, "mem.yaml")))
    assert "Memory (" not in prompt_of(script, "writer_a")
    shown = runtime_on(url, database, home, recall=1)
    asyncio.run(shown.drive(shown.create(TWO, "mem.yaml")))
    assert "- preference:style: concise" in prompt_of(script, "writer_a")


def test_half_a_character_in_a_memory_write_is_written_as_a_replacement(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """A model's memory value or key holding a lone surrogate (JSON's ``\\ud800``) is stored with U+FFFD, as the
    run's events store it: it failed the attempt while memory was written — after the rules had let it through —
    and the answer was lost (found by an attack). The next run is shown what was stored."""
    url, script = model
    writes = [{"op": "promote_to_long_term", "key": "lt\ud800", "value": "a\ud800b"},
              {"op": "store_vector", "key": "vec", "value": "\udc00abc"}]  # fmt: skip
    script.answers = {"writer_a": [envelope("Noted. [STATUS: SUCCESS]", memory_operations=writes)],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    database = f"sqlite:///{tmp_path / 'gs.db'}"
    first = runtime_on(url, database, tmp_path)
    run_id = first.create(TWO, "mem.yaml")
    assert asyncio.run(first.drive(run_id)).status == "completed"
    second = runtime_on(url, database, tmp_path)
    assert asyncio.run(second.drive(second.create(TWO, "mem.yaml"))).status == "completed"
    later = prompt_of(script, "writer_a")
    assert "- lt\ufffd: a\ufffdb" in later and "- vec: \ufffdabc" in later


def test_a_memory_write_the_packet_drops_is_said_in_the_agents_completion(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """A memory operation the packet's validation drops (a value that is an object, an op nobody knows) leaves the
    rest of the answer as it was ("never block the user") and is named in the agent's ``AgentCompleted``
    (``warnings``): it was dropped with no trace in the run (found by an attack)."""
    url, script = model
    writes = [{"op": "note", "key": "shape", "value": {"not": "text"}}, {"op": "erase_all", "key": "k"},
              {"op": "note", "key": "kept", "value": "this one is text"}]  # fmt: skip
    script.answers = {"writer_a": [envelope("Noted. [STATUS: SUCCESS]", memory_operations=writes)],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    runtime = runtime_on(url, f"sqlite:///{tmp_path / 'gs.db'}", tmp_path)
    run_id = runtime.create(TWO, "mem.yaml")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    first, second = [e.payload for e in runtime.store.events(run_id) if e.type == "AgentCompleted"]
    assert [m["key"] for m in first["memory"]] == ["kept"]
    dropped = [w for w in first["warnings"] if "memory_operations" in w and "this item was dropped" in w]
    assert len(dropped) == 2, first["warnings"]
    assert "warnings" not in second  # an answer nothing was dropped from says nothing


def test_an_answer_of_thousands_of_dropped_writes_names_the_first_and_counts_the_rest(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """The warnings kept in the event are bounded: 3,000 dropped memory writes made 6,000 warnings in it (60,000 made a
    14 MB event, found by an attack); the first are named and the last says how many more there were. Only the first
    2,000 items of the section are read at all (the rest are dropped unread, with one warning)."""
    url, script = model
    writes = [{"op": "erase_all", "key": f"k{n}"} for n in range(3000)]
    script.answers = {"writer_a": [envelope("Noted. [STATUS: SUCCESS]", memory_operations=writes)],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    runtime = runtime_on(url, f"sqlite:///{tmp_path / 'gs.db'}", tmp_path)
    run_id = runtime.create(TWO, "mem.yaml")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    first = next(e.payload for e in runtime.store.events(run_id) if e.type == "AgentCompleted")
    assert first["warnings"][0] == "memory_operations has 3000 items; only the first 2000 are read, the other 1000 " \
                                   "were dropped"  # fmt: skip
    assert len(first["warnings"]) == 64 and "memory_operations.0" in first["warnings"][1]
    assert first["warnings"][-1] == f"... and {1 + 2000 - 63} more warnings"  # the section's, then each item read


def test_what_a_paused_attempts_packet_dropped_is_said_in_its_failure(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """An attempt that pauses says in its ``AgentFailed`` what its packet's validation dropped — a memory write whose
    value is an object, and a ``mangle_updates`` item that is no fact a model may assert (a rule) — as a completed
    attempt does in its ``AgentCompleted``: both were named in no event (found by an attack on the run's record)."""
    url, script = model
    guards = tmp_path / "memory.mg"
    guards.write_text('needs_approval(R, A, /safety, "no long-term memory") :- '
                      'memory_write(R, A, /promote_to_long_term, _, _).\n')  # fmt: skip
    writes = [*WRITES[:1], {"op": "note", "key": "shape", "value": {"not": "text"}}]
    updates = ["task_status(/t1, /in_progress)", "permitted(X) :- task_status(X, /done)."]
    script.answers = {"writer_a": [envelope("Noted. [STATUS: SUCCESS]", memory_operations=writes,
                                            mangle_updates=updates)]}  # fmt: skip
    settings = ProjectConfig.model_validate({"models": {"default": f"openai-chat:m@{url}"},
                                             "policy": {"guards": [guards]}})  # fmt: skip
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'g.db'}"), tmp_path / "home", settings=settings)
    run_id = runtime.create(TWO, "mem.yaml")
    assert asyncio.run(runtime.drive(run_id)).pause is not None
    [failed] = [e.payload for e in runtime.store.events(run_id) if e.type == "AgentFailed"]
    said = failed["warnings"]
    assert any("memory_operations.1" in w and "this item was dropped" in w for w in said), said
    assert any(w.startswith("mangle_updates: 'permitted(X) :- task_status(X, /done).' was dropped: ") for w in said)
    assert not any("task_status(/t1" in w for w in said)  # an update it accepted is no warning


def test_a_failed_attempt_names_what_its_packet_dropped(tmp_path: Path, model: tuple[str, Script]) -> None:
    """An attempt failed by a hard error (its tool requests malformed) names what its packet dropped too; one whose
    packet dropped nothing carries no ``warnings`` key."""
    url, script = model
    bad_tools = [{"tool": 42}]  # a tool named by a number: malformed
    script.answers = {"writer_a": [envelope("Reading. [STATUS: SUCCESS]", tool_requests=bad_tools,
                                            memory_operations=[{"op": "erase_all", "key": "k"}])]}  # fmt: skip
    runtime = runtime_on(url, f"sqlite:///{tmp_path / 'gs.db'}", tmp_path)
    run_id = runtime.create(TWO, "mem.yaml")
    asyncio.run(runtime.drive(run_id))
    failures = [e.payload for e in runtime.store.events(run_id) if e.type == "AgentFailed" and e.agent == "writer_a"]
    assert failures and "malformed" in str(failures[0]["error"]), failures
    assert any("memory_operations.0" in w for w in failures[0]["warnings"]), failures[0]


def test_a_tool_request_holding_half_a_character_runs_no_tool(tmp_path: Path, model: tuple[str, Script]) -> None:
    """A tool request whose argument holds a lone surrogate (JSON's ``\\ud800``) is malformed, the attempt's hard
    error: a tool gets exactly what the model sent or nothing — never U+FFFD in its place, as memory, which only
    keeps text, stores it."""
    url, script = model
    request = [{"tool": "read_file", "argument": "notes\ud800.txt"}]
    script.answers = {"writer_a": [envelope("Reading. [STATUS: SUCCESS]", tool_requests=request)]}
    runtime = runtime_on(url, f"sqlite:///{tmp_path / 'gs.db'}", tmp_path)
    run_id = runtime.create(TWO, "mem.yaml")
    asyncio.run(runtime.drive(run_id))
    events = runtime.store.events(run_id)
    assert not [e for e in events if e.type == "ToolCall"]
    [failed, *_] = [e.payload for e in events if e.type == "AgentFailed" and e.agent == "writer_a"]
    assert "tool requests are malformed" in str(failed["error"]), failed


def test_a_later_rounds_dropped_items_are_counted_once_the_warnings_are_full(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """A first round whose packet drops 70 items fills the event's 64 warnings; what the second round's packet
    drops is counted in the last one still — it was left out uncounted, so junk in one round hid the next round's
    drops (found by an attack)."""
    url, script = model
    junk = [{"op": "erase_all", "key": f"k{n}"} for n in range(70)]
    reading = [{"tool": "read_file", "argument": "notes.txt"}]
    script.answers = {"writer_a": [envelope("Reading. [STATUS: SUCCESS]", tool_requests=reading,
                                            memory_operations=junk),
                                   envelope("Noted. [STATUS: SUCCESS]", memory_operations=junk[:3])],
                      "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}  # fmt: skip
    runtime = runtime_on(url, f"sqlite:///{tmp_path / 'gs.db'}", tmp_path)
    run_id = runtime.create(TWO, "mem.yaml")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    first = next(e.payload for e in runtime.store.events(run_id) if e.type == "AgentCompleted")
    assert len(first["warnings"]) == 64
    assert first["warnings"][-1] == "... and 10 more warnings"  # 70 + 3 dropped, 63 named


FORBIDDEN = "permitted(X) :- task_status(X, /done)."


def dropped_named(warnings: list[str]) -> bool:
    return any(w.startswith(f"mangle_updates: {FORBIDDEN!r} was dropped: ") for w in warnings) and any(
        "memory_operations.0" in w for w in warnings)  # fmt: skip


def first_failure(model: tuple[str, Script], tmp_path: Path, answer: Any) -> dict[str, Any]:
    """writer_a's first ``AgentFailed`` once it answered ``answer`` and the run stopped."""
    url, script = model
    script.answers = {"writer_a": [answer]}
    runtime = runtime_on(url, f"sqlite:///{tmp_path / 'gs.db'}", tmp_path)
    run_id = runtime.create(TWO, "mem.yaml")
    asyncio.run(runtime.drive(run_id))
    failures = [e.payload for e in runtime.store.events(run_id) if e.type == "AgentFailed" and e.agent == "writer_a"]
    assert failures, [e.type for e in runtime.store.events(run_id)]
    return failures[0]


def test_a_pause_before_a_tool_call_names_what_the_packet_dropped(tmp_path: Path, model: tuple[str, Script]) -> None:
    """The shipped rules pause before a ``delete_file`` call: the attempt's ``AgentFailed`` names what its packet's
    validation dropped, as any other pause's does (it said nothing: found by an attack)."""
    url, script = model
    (tmp_path / "notes.txt").write_text("old notes\n")
    deleting = [{"tool": "delete_file", "argument": "notes.txt"}]
    script.answers = {"writer_a": [envelope("Cleaning. [STATUS: SUCCESS]", tool_requests=deleting,
                                            mangle_updates=[FORBIDDEN],
                                            memory_operations=[{"op": "erase_all", "key": "k"}])]}  # fmt: skip
    runtime = runtime_on(url, f"sqlite:///{tmp_path / 'gs.db'}", tmp_path)
    run_id = runtime.create(TWO, "mem.yaml")
    assert asyncio.run(runtime.drive(run_id)).pause is not None
    [failed] = [e.payload for e in runtime.store.events(run_id) if e.type == "AgentFailed"]
    assert dropped_named(failed["warnings"]), failed
    assert (tmp_path / "notes.txt").exists()


def test_a_packet_the_gate_then_rejects_still_names_what_it_dropped(tmp_path: Path, model: tuple[str, Script]) -> None:
    """A valid packet followed by a second ``control_packet`` key: the gate rejects the output, and the attempt's
    failure names what the validated packet had dropped (the dropped update was left out: found by an attack)."""
    packet = envelope("x", mangle_updates=[FORBIDDEN], memory_operations=[{"op": "erase_all", "key": "k"}])
    text = json.dumps(packet)[:-1] + ', "control_packet": {}}'
    failed = first_failure(model, tmp_path, sse(text))
    assert "rejected by the packet gate" in str(failed["error"]) and dropped_named(failed["warnings"]), failed


def test_an_answer_ended_by_the_providers_error_names_what_its_packet_dropped(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """A whole envelope, then an error in the stream: the attempt fails on the error and still names what its
    packet's validation had dropped (the warnings were lost on that path: found by an attack)."""
    text = json.dumps(envelope("Noted. [STATUS: SUCCESS]", mangle_updates=[FORBIDDEN],
                               memory_operations=[{"op": "erase_all", "key": "k"}]))  # fmt: skip
    body = sse(text).replace(b"data: [DONE]", b'data: {"error": {"message": "overloaded", "type": "server_error"}}'
                                              b"\n\ndata: [DONE]")  # fmt: skip
    failed = first_failure(model, tmp_path, body)
    assert "overloaded" in str(failed["error"]) and dropped_named(failed["warnings"]), failed
