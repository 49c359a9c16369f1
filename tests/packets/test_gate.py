"""The streaming gate: surface text only after a validated packet; decisions independent of chunking."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.kernel import Kernel, Shards, VirtualStore
from groundstate.packets import ABORTED, ACCEPTED, GateResult, PacketGate, UpdateValidator
from groundstate.packets import gate as gate_module
from groundstate.packets.gate import _STRING_END, _STRUCTURE, Where

from ..pieces import split_at
from .conftest import envelope, text


def run_gate(validator: UpdateValidator, output: str, cuts: Sequence[int] = (), **options: Any) -> GateResult:
    gate = PacketGate(validator, **options)
    released = [piece for chunk in split_at(output, cuts) for piece in gate.feed(chunk)]
    result = gate.close()
    assert "".join(released) == result.surface
    return result


def test_surface_is_released_only_after_the_packet_validates(validator: UpdateValidator) -> None:
    output = text(envelope(surface="Hello, world"))
    gate = PacketGate(validator)
    packet_end = output.index('"surface_response"')
    assert gate.feed(output[:packet_end]) == [] and gate.packet is not None  # validated, nothing shown yet
    world = output.index("world")
    assert "".join(gate.feed(output[packet_end:world])) == "Hello, "  # incrementally
    assert "".join(gate.feed(output[world:])) == "world"
    result = gate.close()
    assert result.decision == ACCEPTED and result.packet is not None and result.packet.accepted_updates


def test_escapes_and_surrogate_pairs_split_anywhere(validator: UpdateValidator) -> None:
    surface = 'quote " backslash \\ tab \t emoji 😀 accents é 日本 \u2028'
    output = json.dumps(envelope(surface=surface))  # ASCII escapes, \ud83d\ude00 pairs
    for cut in range(len(output)):
        assert run_gate(validator, output, [cut]).surface == surface


ABORTS = [
    (json.dumps({"surface_response": "hi", "control_packet": envelope()["control_packet"]}),
     "surface_response came before control_packet"),
    ("x" * 5000 + text(envelope()), "no JSON object started within the first 4096 bytes"),
    ('{"notes": "' + "n" * 5000 + '", ' + text(envelope())[1:], "control_packet key did not appear within"),
    (text({"control_packet": {"mangle_updates": []}, "surface_response": "x"}), "the control packet was rejected"),
    (text(envelope())[:-10], "the stream ended before the envelope was complete"),
    (text(envelope())[:40], "the stream ended inside the control packet"),
    ('{"control_packet": "yes", "surface_response": "x"}', "control_packet must be a JSON object"),
    ('{"control_packet": ' + json.dumps(envelope()["control_packet"]) + ', "surface_response": 7}',
     "surface_response must be a JSON string"),
    (text(envelope())[:-1] + ', "control_packet": {}}', "a second control_packet"),
    ("", "the stream ended before a control_packet key"),
    (text(envelope(surface="ok"))[:-3] + '\\q ok"}', "an invalid escape sequence"),
]  # fmt: skip


def test_abort_reasons(validator: UpdateValidator) -> None:
    for output, reason in ABORTS:
        result = run_gate(validator, output)
        assert run_gate(validator, output, list(range(len(output)))).reason == result.reason
        assert result.decision == ABORTED and reason in (result.reason or ""), (output[:80], result.reason)
        assert result.packet is None


def test_the_error_state_is_absorbing(validator: UpdateValidator) -> None:
    """Once aborted, no later text is released and the first reason stays, even a valid envelope after it."""
    gate = PacketGate(validator)
    assert gate.feed('{"surface_response": "early"') == []
    assert gate.where is Where.ABORTED
    assert gate.feed(", " + text(envelope(surface="late"))) == []
    result = gate.close()
    assert result.decision == ABORTED and result.reason == "surface_response came before control_packet"
    assert result.surface == ""


def test_the_transition_tables_cover_every_state() -> None:
    """Every state is either terminal, a string (left only by its closing quote) or has a row of edges."""
    for where in Where:
        in_tables = (where in _STRUCTURE) + (where in _STRING_END) + (where in (Where.CLOSED, Where.ABORTED))
        assert in_tables == 1, where
    targets = {edge[0] for row in _STRUCTURE.values() for edge in row.values()} | {e[0] for e in _STRING_END.values()}
    assert Where.ABORTED not in targets  # refusals go through _abort, never through a table edge
    assert set(Where) - targets == {Where.SURFACE, Where.ABORTED}  # SURFACE is entered by an action


NO_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
surfaces = st.text(st.characters(codec="utf-8", exclude_categories=NO_SURROGATES), max_size=60)


@st.composite
def outputs(draw: st.DrawFn) -> str:
    value = envelope(
        draw(st.lists(st.sampled_from(["task_status(/a, /pending)", "bogus(1)", 'file_state("x", /read)']))),
        draw(surfaces),
    )
    if draw(st.booleans()):
        value = {"preamble": draw(surfaces), **value}
    output = json.dumps(value, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1])))
    return draw(st.sampled_from(["", "```json\n", "Sure: "])) + output + draw(st.sampled_from(["", "\n```"]))


@settings(max_examples=150, deadline=None)
@given(outputs(), st.lists(st.integers(0, 400), max_size=8))
def test_any_chunking_gives_the_same_decision(validator: UpdateValidator, output: str, cuts: list[int]) -> None:
    whole = run_gate(validator, output)
    assert whole.decision == ACCEPTED
    split = run_gate(validator, output, cuts)
    assert (split.decision, split.reason, split.surface) == (whole.decision, whole.reason, whole.surface)


@st.composite
def envelopes_with_structure(draw: st.DrawFn) -> str:
    """An envelope whose top-level values and control packet hold arrays, nested objects, numbers, literals and
    whitespace of every kind, with prose before it, maybe cut short or with one character changed."""
    scalars = st.sampled_from(["1", "-2.5e3", "true", "false", "null", "0"])
    blank = st.sampled_from(["", " ", "\t", "\r\n", "  \n "])
    leaf = st.one_of(scalars, st.builds(json.dumps, st.text(max_size=4)))
    nested = st.recursive(leaf, lambda inner: st.one_of(
        st.builds(lambda xs, b: "[" + b + ("," + b).join(xs) + b + "]", st.lists(inner, max_size=3), blank),
        st.builds(lambda xs, b: "{" + b + ("," + b).join(f'"k{i}"{b}:{b}{x}' for i, x in enumerate(xs)) + b + "}",
                  st.lists(inner, max_size=3), blank)), max_leaves=8)  # fmt: skip
    output = draw(outputs())
    start = output.index("{") + 1
    extra = "".join(
        f'"x{i}"{draw(blank)}:{draw(blank)}{draw(nested)},{draw(blank)}' for i in range(draw(st.integers(0, 2)))
    )
    output = output[:start] + draw(blank) + extra + output[start:]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(output) - 1))
        output = (
            output[:at] + draw(st.sampled_from(['"', "{", "}", "[", "]", ",", ":", " ", "x", "\\"])) + output[at + 1 :]
        )
    return draw(st.sampled_from(["", "prose { ", "Sure:\n"])) + output


@settings(max_examples=300, deadline=None)
@given(envelopes_with_structure(), st.lists(st.integers(0, 400), max_size=4))
def test_runs_decide_as_the_table_one_character_at_a_time(
    validator: UpdateValidator, output: str, cuts: list[int]
) -> None:
    """The scanner consumes runs of characters that change nothing at once; the reference takes every character
    through the transition table (whitespace skipped), as the gate's theory of operation describes: the two must
    agree on everything they decide."""
    with patch.dict(gate_module._INERT, {where: re.compile(r"[ \t\r\n]") for where in gate_module._INERT}):
        reference = run_gate(validator, output)
    runs = run_gate(validator, output, cuts)
    assert (runs.decision, runs.reason, runs.surface, runs.warnings) == (
        reference.decision, reference.reason, reference.surface, reference.warnings)  # fmt: skip
    assert (runs.packet and runs.packet.to_json()) == (reference.packet and reference.packet.to_json())


@st.composite
def malformed(draw: st.DrawFn) -> str:
    output = draw(outputs())
    kind = draw(st.sampled_from(["truncate", "delete", "insert", "swap"]))
    at = draw(st.integers(0, max(0, len(output) - 1)))
    if kind == "truncate":
        return output[:at]
    if kind == "delete":
        return output[:at] + output[at + 1 :]
    if kind == "insert":
        return output[:at] + draw(st.sampled_from(['"', "{", "}", "\\", ",", "x"])) + output[at:]
    packet = json.loads(output[output.index("{") :].rstrip("`\n"))["control_packet"]
    return json.dumps({"surface_response": "first", "control_packet": packet})


@settings(max_examples=150, deadline=None)
@given(malformed(), st.lists(st.integers(0, 400), max_size=6))
def test_malformed_streams_never_change_the_kernel(validator: UpdateValidator, output: str, cuts: list[int]) -> None:
    result = run_gate(validator, output, cuts)
    assert run_gate(validator, output).decision == result.decision
    with tempfile.TemporaryDirectory() as workspace:
        kernel = Kernel(workspace)
        before = {p: set(f) for p, f in kernel.engine.base.items()}
        reports = Shards(kernel, VirtualStore(kernel.workspace)).step_gated(result)
        after = {p: set(f) for p, f in kernel.engine.base.items()}
        if result.decision == ABORTED:
            assert before == after and reports == []
        else:
            assert after != before  # an accepted packet did reach the kernel (the intent, at least)


def test_cli_gate(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    path.write_text(text(envelope(surface="Shown")), encoding="utf-8")
    command = [sys.executable, "-m", "groundstate", "packets", "gate", str(path), "--chunk-size", "3"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout) == {"decision": "accepted", "reason": None,
                                                                 "surface": "Shown",
                                                                 "accepted_updates": ["task_status(/t1, /in_progress)"],
                                                                 "dropped_updates": []}  # fmt: skip
    path.write_text('{"surface_response": "x", "control_packet": {}}', encoding="utf-8")
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 1 and json.loads(done.stdout)["decision"] == "aborted"
