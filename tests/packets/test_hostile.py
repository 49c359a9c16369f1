"""Hostile model output at the packet layer: surrogates fed to the gate, quadratic fence patterns, nesting."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from groundstate.packets import ACCEPTED, Limits, PacketGate, UpdateValidator, parse_output
from groundstate.packets.extract import fenced_blocks, find_envelope

PACKET = {"intent_classification": {"category": "/query", "verb": "/x", "confidence": 0.9}, "mangle_updates": [],
          "memory_operations": []}  # fmt: skip
_OLD_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.DOTALL)


def gate() -> PacketGate:
    return PacketGate(UpdateValidator({}, set()))


def test_lone_and_split_surrogates_are_data_for_the_gate() -> None:
    head = json.dumps({"control_packet": PACKET, "surface_response": "a"})[:-2]
    g = gate()
    g.feed(head + "\ud800b")  # a lone surrogate in the text a client decoded leniently
    g.feed('\udc00"}')
    result = g.close()
    assert result.decision == ACCEPTED and result.surface == "a\ud800b\udc00"


def test_fence_extraction_is_linear_on_many_unclosed_openings() -> None:
    text = "x```\n" * 32_000  # 30 s with a lazy-bodied regex; the scan is linear now
    assert fenced_blocks(text) == [] and find_envelope(text) is None


def test_a_deeply_nested_candidate_is_skipped_not_raised() -> None:
    text = "[" * 100_000 + json.dumps({"control_packet": PACKET}) + "]" * 100_000
    found = find_envelope(text)
    assert found is not None and found.envelope["control_packet"] == PACKET  # the real object, found inside


@given(st.lists(st.sampled_from(["```", "```json", "\n", "\r\n", " ", "x", "{}", "``"]), max_size=30))
def test_fenced_blocks_agree_with_the_regex_they_replace(pieces: list[str]) -> None:
    text = "".join(pieces)
    expected = [(m.start(), m.end(), m.group(1)) for m in _OLD_FENCE.finditer(text)]
    assert fenced_blocks(text) == expected


def test_a_packet_of_millions_of_items_is_read_only_as_far_as_its_bound() -> None:
    """Every list of the packet is read up to the bound on updates (2,000 by default) and the rest dropped unread,
    with one warning saying how many: a 6 MB packet of two million ``state_transitions`` items, each invalid, took
    4 GB and 17 s to validate item by item, a warning each, and so did a list inside ``impact_analysis`` (found by
    two attacks)."""
    packet = {"intent_classification": {"category": "/query", "verb": "/explain", "confidence": 0.9},
              "mangle_updates": ["x"] * 300_000, "memory_operations": [{"op": "x"}] * 300_000,
              "state_transitions": [1] * 1_000_000,
              "impact_analysis": {"files_affected": [0] * 1_000_000}}  # fmt: skip
    text = json.dumps({"control_packet": packet, "surface_response": "ok"})
    result = parse_output(text, UpdateValidator({}, None), Limits(max_updates=50))
    assert result.ok
    cut = (("mangle_updates", 300_000), ("memory_operations", 300_000), ("state_transitions", 1_000_000),
           ("impact_analysis.files_affected", 1_000_000))  # fmt: skip
    for section, count in cut:
        said = f"{section} has {count} items; only the first 50 are read, the other {count - 50} were dropped"
        assert said in result.warnings, result.warnings[:5]
    assert {int(w.split(".")[1].split(":")[0]) for w in result.warnings if w.startswith("state_transitions.")} == set(
        range(50))  # each item read is judged; none past the bound is  # fmt: skip
    assert len(result.warnings) < 200
    assert len(result.dropped_updates) == 50
