"""The context window's reserves decide how much upstream output an agent receives: fairly shared (property-tested),
cut with a marker, each cut a fact the guards see; changing a reserve changes what is kept."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from groundstate.config import ContextWindow, ProjectConfig, ShardProfile
from groundstate.runtime import EventStore, Runtime
from groundstate.runtime.context import fit_upstream, upstream_room

from .conftest import Script, envelope

outputs = st.lists(st.tuples(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.text(max_size=400)), max_size=6)


@given(outputs, st.integers(min_value=0, max_value=2000))
def test_the_room_is_shared_fairly(upstream: list[tuple[str, str]], room: int) -> None:
    fitted = fit_upstream(upstream, room)
    assert [f.agent for f in fitted] == [a for a, _ in upstream]
    assert sum(f.kept for f in fitted) <= room or not any(f.cut for f in fitted)
    if sum(len(t) for _, t in upstream) <= room:
        assert [f.text for f in fitted] == [t for _, t in upstream]  # nothing is cut when everything fits
    cut = {f.kept for f in fitted if f.cut}
    assert len(cut) <= 1  # every cut output keeps the same length
    for f, (_, text) in zip(fitted, upstream, strict=True):
        assert f.total == len(text) and f.text.startswith(text[: f.kept])
        if not f.cut:
            assert f.text == text and all(len(text) <= share for share in cut)  # only the longest are cut
        else:
            assert f.text.endswith(f"[groundstate: cut to {f.kept} of {len(text)} characters by the context window]")


def test_the_reserves_leave_room_for_the_answer_and_the_tools() -> None:
    profile = ShardProfile(max_context_tokens=1000)
    assert upstream_room(profile, ContextWindow(), 0) == 2000  # 4000 characters, half of them reserved
    assert upstream_room(profile, ContextWindow(reserve_output_pct=10, reserve_tools_pct=0), 600) == 3000
    assert upstream_room(profile, ContextWindow(), 5000) == 0


FLOW = """
name: window
agents:
  - id: research_a
    instructions: Find everything.
    tools: [web_search]
  - id: writer_b
    instructions: Write it.
    depends_on: [research_a]
"""


def run_with(tmp_path: Path, url: str, script: Script, window: dict[str, int], guards: Path | None = None) -> Runtime:
    long_output = "[BYPASS: the data is given] " + "lithium " * 2500 + "[STATUS: SUCCESS]"  # about 20,000 characters
    script.answers = {"research_a": [envelope(long_output)], "writer_b": [envelope("Brief. [STATUS: SUCCESS]")]}
    settings = ProjectConfig.model_validate({
        "models": {"default": f"openai-chat:m@{url}"},
        "limits": {"shard_profiles": {"writer": {"max_context_tokens": 3000}, "main": {}}, "context_window": window},
        **({"policy": {"guards": [guards]}} if guards else {}),
    })  # fmt: skip
    tmp_path.mkdir(parents=True, exist_ok=True)
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'w.db'}"), tmp_path / "home", settings=settings)
    asyncio.run(runtime.drive(runtime.create(FLOW, "w.yaml")))
    return runtime


def kept_in(script: Script) -> int:
    prompt = next(str(b["messages"][1]["content"]) for a, b in script.requests if a == "writer_b")
    found = re.search(r"\[groundstate: cut to (\d+) of (\d+) characters by the context window\]", prompt)
    assert found is not None, prompt[-300:]
    return int(found.group(1))


def test_an_agent_receives_what_its_window_leaves(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    run_with(tmp_path / "a", url, script, {})
    default = kept_in(script)
    script.requests.clear()
    run_with(tmp_path / "b", url, script, {"reserve_output_pct": 10, "reserve_tools_pct": 10})
    assert kept_in(script) > default + 3000  # 30 more percent of a 12,000-character window


def test_a_cut_is_a_fact_a_guard_can_pause_on(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    guards = tmp_path / "window.mg"
    guards.write_text('needs_approval(R, A, /quality, "the research was cut") :- upstream_truncated(R, A, _, _, _).\n')
    runtime = run_with(tmp_path, url, script, {}, guards)
    state = runtime.store.state(runtime.store.runs()[0]["id"])
    assert state.pause is not None and (state.pause.agent, state.pause.reason) == ("writer_b", "the research was cut")
    assert not any(a == "writer_b" for a, _ in script.requests)  # paused before it started
