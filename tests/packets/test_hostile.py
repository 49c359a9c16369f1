"""Hostile model output at the packet layer: surrogates fed to the gate, quadratic fence patterns, nesting."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from groundstate.packets import ACCEPTED, PacketGate, UpdateValidator
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
