"""Parsing model output into a control packet: degradation is a warning, only a bad intent rejects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from groundstate.packets import Limits, UpdateValidator, json_schema, parse_output

from .conftest import envelope, text


def test_plain_envelope_is_accepted_without_warnings(validator: UpdateValidator) -> None:
    result = parse_output(text(envelope()), validator)
    assert result.ok and result.warnings == [] and result.surface == "Done."
    assert [u.text for u in result.accepted_updates] == ["task_status(/t1, /in_progress)"]


def test_fenced_envelope_is_a_warning(validator: UpdateValidator) -> None:
    result = parse_output("Here it is:\n```json\n" + text(envelope()) + "\n```\n", validator)
    assert result.ok and result.warnings == ["the envelope was inside a code fence"]


def test_the_last_envelope_in_text_wins_over_earlier_decoys(validator: UpdateValidator) -> None:
    decoy = envelope(["task_status(/decoy, /failed)"], "decoy")
    real = envelope(["task_status(/real, /complete)"], "real")
    output = f"An example {{ of a stray brace. Example: {text(decoy)} -- and mine: {text(real)} bye"
    result = parse_output(output, validator)
    assert result.surface == "real" and [u.text for u in result.accepted_updates] == ["task_status(/real, /complete)"]
    assert "inside surrounding text" in result.warnings[0]


def test_surface_only_fallback_is_shown_but_rejected(validator: UpdateValidator) -> None:
    result = parse_output("Just an answer, no packet.", validator)
    assert not result.ok and result.surface == "Just an answer, no packet." and result.accepted_updates == []
    assert result.errors and "no control packet" in result.warnings[0]


@pytest.mark.parametrize(
    "intent",
    [None, {"category": "/query"}, {"category": "/bogus", "verb": "/x", "confidence": 0.5},
     {"category": "/query", "verb": "explain", "confidence": 0.5},
     {"category": "/query", "verb": "/x", "confidence": 2}],
)  # fmt: skip
def test_an_unusable_intent_classification_rejects_the_packet(validator: UpdateValidator, intent: object) -> None:
    value = envelope()
    if intent is None:
        del value["control_packet"]["intent_classification"]
    else:
        value["control_packet"]["intent_classification"] = intent
    result = parse_output(text(value), validator)
    assert not result.ok and result.accepted_updates == []
    assert any("intent_classification" in e for e in result.errors)


def test_bad_optional_parts_are_dropped_and_the_rest_kept(validator: UpdateValidator) -> None:
    value = envelope(
        impact_analysis={"estimated_scope": "enormous"},
        memory_operations=[{"op": "teleport", "key": "k"}, {"op": "note", "key": "k", "value": "v"}],
        future_field={"v": 1},
    )
    value["control_packet"]["mangle_updates"].append(42)
    result = parse_output(text(value), validator)
    assert result.ok and result.packet is not None
    assert result.packet.impact_analysis is None and len(result.packet.memory_operations) == 1
    assert result.packet.model_dump()["future_field"] == {"v": 1}  # forward compatible
    assert {"update": "42", "reason": "an update must be a string"} in result.to_json()["dropped_updates"]
    assert len(result.warnings) == 2


def test_missing_required_lists_are_warnings(validator: UpdateValidator) -> None:
    value = envelope()
    del value["control_packet"]["mangle_updates"], value["control_packet"]["memory_operations"]
    result = parse_output(text(value), validator)
    assert result.ok and len(result.warnings) == 2


DROPS = [
    ("task_status(X, /pending)", "variable X"),
    ("task_status(/a, /b) :- shard_state(/a, /b)", "rules are not allowed"),
    ("Decl task_status(A, B).", "declarations"),
    ("task_status(/a, /b). task_status(/c, /d)", "exactly one fact"),
    ("nonexistent(/a)", "not declared"),
    ("task_status(/a)", "has 2 arguments"),
    ('task_status("a", /b)', "does not match the declared bound"),
    ('pending_action(/action/1, /delete_file, "a", "", 1)', "not on the allowlist"),
    ('workspace_path("a", /inside)', "external predicate"),
    ("current_ooda_phase(/act)", "derived by the policy"),
    ('diagnostic(/error, "a.py", fn:plus(1, 2), "E1", "m")', "function fn:plus"),
    ("task_status(/a, ", "not valid Mangle"),
]


@pytest.mark.parametrize(("update", "reason"), DROPS)
def test_invalid_updates_are_dropped_with_the_reason(validator: UpdateValidator, update: str, reason: str) -> None:
    result = parse_output(text(envelope(["task_status(/ok, /complete)", update])), validator)
    assert result.ok and [u.text for u in result.accepted_updates] == ["task_status(/ok, /complete)"]
    [dropped] = result.dropped_updates
    assert dropped.update == update and reason in dropped.reason


def test_limits(validator: UpdateValidator) -> None:
    small = UpdateValidator(validator.predicates, validator.allowlist, max_updates=2, max_update_chars=40)
    updates = ["task_status(/a, /pending)", "task_status(/b, /pending)", "task_status(/c, /pending)",
               'diagnostic(/error, "a.py", 1, "E1", "' + "x" * 50 + '")']  # fmt: skip
    result = parse_output(text(envelope(updates, "y" * 30)), small, Limits(max_surface_chars=10))
    assert len(result.accepted_updates) == 2 and result.surface == "y" * 10
    assert [d.reason.split(" (")[0] for d in result.dropped_updates] == [
        "more than 2 updates in one packet",
        "more than 2 updates in one packet",
    ]
    assert any("only the first 10" in w for w in result.warnings)
    refusal = small.check_one(updates[3])
    assert isinstance(refusal, str) and "longer than 40 characters" in refusal


def test_constructors_are_allowed_in_updates(validator: UpdateValidator) -> None:
    permissive = UpdateValidator(validator.predicates, None)
    accepted = permissive.check_one('requested_action(/r1, /write_file, "a.txt", "hi")')
    assert not isinstance(accepted, str) and accepted.predicate == "requested_action"


def test_schema_lists_control_packet_first() -> None:
    schema = json_schema()
    assert list(schema["properties"]) == ["control_packet", "surface_response"]
    assert schema["required"] == ["control_packet", "surface_response"]
    packet = schema["$defs"]["ControlPacket"]
    assert packet["required"] == ["intent_classification", "mangle_updates", "memory_operations"]
    assert len(packet["properties"]) == 10


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "groundstate", "packets", *args], capture_output=True, text=True)


def test_cli_validate_and_schema(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(text(envelope(["task_status(/a, /pending)", "bogus(1)"])), encoding="utf-8")
    done = run("validate", str(good))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["accepted_updates"] == ["task_status(/a, /pending)"]
    assert report["dropped_updates"][0]["update"] == "bogus(1)"
    bad = tmp_path / "bad.txt"
    bad.write_text("no packet here", encoding="utf-8")
    assert run("validate", str(bad)).returncode == 1
    assert json.loads(run("schema").stdout)["properties"]["control_packet"]
