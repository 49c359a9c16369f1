"""One SIGIL recording per run: answers streamed at once interleave frame by frame in ``run.sigil`` and each comes
back whole from its own stream; the index names every stream; a later driver (a resumed run) appends, its streams
numbered after the last one indexed; whatever the interleaving, the file decodes without a reset."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.providers import SigilBridge, TextDelta
from groundstate.runtime import RunRecording, recorded_answers, recording_index
from groundstate.wire import ByteVocabulary, Content, Reset, replay


def _record(recording: RunRecording, answers: dict[str, list[str]], seed: int) -> None:
    """Stream every agent's answer at once: their pieces pushed in a random interleaving, each stream then ended."""
    bridges = {agent: SigilBridge(ByteVocabulary(), recording.stream(agent, 1, 1, "scripted")) for agent in answers}
    pending = [(agent, piece) for agent, pieces in answers.items() for piece in pieces]
    order = {agent: [p for a, p in pending if a == agent] for agent in answers}
    rng = random.Random(seed)
    while any(order.values()):
        agent = rng.choice([a for a, left in order.items() if left])
        recording.write(bridges[agent].push(TextDelta(order[agent].pop(0))))
    for bridge in bridges.values():
        recording.write(bridge.end())


def _texts(folder: Path) -> dict[tuple[str, int], str]:
    return {(entry["agent"], entry["stream"]): b"".join(bytes(c.tokens) for c in chunks
                                                       if isinstance(c, Content)).decode("utf-8")
            for entry, chunks in recorded_answers(folder)}  # fmt: skip


pieces = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["research_a", "research_b", "writer_c"]), pieces, min_size=1),
       st.integers(0, 1000))  # fmt: skip
def test_interleaved_answers_come_back_whole(answers: dict[str, list[str]], seed: int) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        recording = RunRecording(folder)
        _record(recording, answers, seed)
        recording.close()
        texts = _texts(folder)
        assert {agent: text for (agent, _), text in texts.items()} == {a: "".join(p) for a, p in answers.items()}
        assert not [c for c in replay(folder / "run.sigil") if isinstance(c, Reset)]


def test_a_later_driver_appends_and_numbers_after_the_last_stream(tmp_path: Path) -> None:
    first = RunRecording(tmp_path)
    _record(first, {"research_a": ["one ", "answer"]}, seed=1)
    first.close()
    second = RunRecording(tmp_path)  # the run resumed by another process
    _record(second, {"research_a": ["again"], "writer_b": ["brief"]}, seed=2)
    second.close()
    assert [(e["stream"], e["agent"]) for e in recording_index(tmp_path)] == [
        (1, "research_a"), (2, "research_a"), (3, "writer_b")]  # fmt: skip
    assert _texts(tmp_path) == {("research_a", 1): "one answer", ("research_a", 2): "again", ("writer_b", 3): "brief"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.jsonl", "run.sigil"]
    assert oct((tmp_path / "run.sigil").stat().st_mode & 0o777) == "0o600"  # it holds everything a model said
