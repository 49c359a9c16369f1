"""Model output → a validated control packet, degrading gracefully and saying so.

"Never block the user": what parses is kept, every degradation is a warning, and only a packet without a usable
``intent_classification`` is rejected — its surface text can still be shown, but nothing of it reaches the
kernel.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .extract import EMBEDDED, FENCED, find_envelope
from .models import REQUIRED, ControlPacket
from .updates import AcceptedUpdate, DroppedUpdate, UpdateValidator

LIST_SECTIONS = ("mangle_updates", "memory_operations", "state_transitions")


@dataclass(frozen=True)
class Limits:
    """Bounds on one packet: updates, their length, tool requests, and the surface's characters."""

    max_surface_chars: int = 50_000
    max_updates: int = 2000  # and items of each list section: past it they are dropped unread, with one warning (a
    # packet of two million one-byte items took 4 GB to validate item by item: found by an attack)
    max_update_chars: int = 1000


@dataclass
class PacketResult:
    """A parsed output: the packet (or the errors that rejected it), accepted and dropped updates, warnings."""

    packet: ControlPacket | None
    surface: str
    source: str = "plain"  # plain, fenced, embedded, surface_only (parse_output) or stream (the gate)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    accepted_updates: list[AcceptedUpdate] = field(default_factory=list)
    dropped_updates: list[DroppedUpdate] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Usable: a packet with a valid intent classification (possibly degraded)."""
        return self.packet is not None

    def to_json(self) -> dict[str, Any]:
        """The result as printed by ``groundstate packets validate``."""
        return {
            "ok": self.ok,
            "errors": self.errors,
            "warnings": self.warnings,
            "accepted_updates": [u.text for u in self.accepted_updates],
            "dropped_updates": [{"update": d.update, "reason": d.reason} for d in self.dropped_updates],
        }


def parse_output(text: str, validator: UpdateValidator | None, limits: Limits | None = None) -> PacketResult:
    """Parse a complete model output. Without a validator, updates are not checked and none is accepted."""
    limits = limits or Limits()
    found = find_envelope(text)
    if found is None:
        notes = ["no control packet found: the whole output is treated as surface text"]
        result = PacketResult(None, _limited_surface(text, limits, notes), "surface_only", warnings=notes)
        result.errors.append("no control packet: nothing in this output may change the kernel")
        return result
    warnings: list[str] = []
    if found.how == FENCED:
        warnings.append("the envelope was inside a code fence")
    elif found.how == EMBEDDED:
        warnings.append("the envelope was found inside surrounding text; the text around it was ignored")
    surface = found.envelope.get("surface_response", "")
    if not isinstance(surface, str):
        warnings.append(f"surface_response is not a string ({type(surface).__name__}); it was ignored")
        surface = ""
    elif "surface_response" not in found.envelope:
        warnings.append("the envelope has no surface_response")
    result = PacketResult(None, _limited_surface(surface, limits, warnings), found.how, warnings=warnings)
    return check_packet(found.envelope["control_packet"], validator, limits, result)


def check_packet(raw: Any, validator: UpdateValidator | None, limits: Limits, result: PacketResult) -> PacketResult:
    """Validate the ``control_packet`` value into ``result``: bad optional parts are dropped, with warnings."""
    if not isinstance(raw, dict):
        result.errors.append(f"control_packet must be a JSON object, not {type(raw).__name__}")
        return result
    data = dict(raw)
    for section in REQUIRED[1:]:
        if section not in data:
            result.warnings.append(f"required section {section} is missing (treated as empty)")
    _read_up_to(data, "", limits.max_updates, result.warnings)
    updates = data.get("mangle_updates", [])
    if not isinstance(updates, list):
        result.warnings.append("mangle_updates is not a list; it was dropped")
        updates = []
    not_text = [u for u in updates if not isinstance(u, str)]
    result.dropped_updates += [DroppedUpdate(json.dumps(u)[:200], "an update must be a string") for u in not_text]
    data["mangle_updates"] = [u for u in updates if isinstance(u, str)]
    while True:
        try:
            packet = ControlPacket.model_validate(data)
            break
        except ValidationError as exc:
            if not _drop_invalid(data, exc, result):
                return result
    if validator is not None:
        check = validator.check(packet.mangle_updates)
        result.accepted_updates, result.dropped_updates = check.accepted, result.dropped_updates + check.dropped
    elif packet.mangle_updates:
        result.warnings.append("no schema to check mangle_updates against: none accepted")
    result.packet = packet
    return result


def _read_up_to(value: Any, where: str, most: int, warnings: list[str]) -> None:
    """Every list in ``value`` (the packet, parsed: nested at most 64 deep) cut to its first ``most`` items, with
    one warning for each list cut: the rest is dropped unread. Validating item by item cost gigabytes — two million
    invalid items in a 6 MB packet took 4 GB and 17 s, in a list section or in ``impact_analysis`` alike (found by
    two attacks)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in list(items):
        path = f"{where}.{key}" if where else str(key)
        if isinstance(item, list) and len(item) > most:
            warnings.append(f"{path} has {len(item)} items; only the first {most} are read, the other "
                            f"{len(item) - most} were dropped")  # fmt: skip
            value[key] = item = item[:most]
        _read_up_to(item, path, most, warnings)


FAIL_CLOSED_GATES: dict[str, Any] = {"requires_user_approval": True}  # what a malformed safety_gates means


def _drop_invalid(data: dict[str, Any], exc: ValidationError, result: PacketResult) -> bool:
    """Remove what failed validation; False when the intent classification itself is unusable."""
    dropped_items: dict[str, set[int]] = {}
    for error in exc.errors():
        location = error["loc"]
        where = ".".join(str(part) for part in location)
        section = str(location[0]) if location else ""
        if section == "intent_classification" or not section:
            result.errors.append(f"{where or 'control_packet'}: {error['msg']} — the packet is rejected")
            continue
        if section == "safety_gates":  # a safety field degrades closed: the model may have asked for approval
            data[section] = FAIL_CLOSED_GATES
            result.warnings.append(f"{where}: {error['msg']} — safety_gates is unusable, so it is read as asking "
                                   "for the user's approval")  # fmt: skip
        elif section in LIST_SECTIONS and len(location) > 1 and isinstance(location[1], int):
            dropped_items.setdefault(section, set()).add(location[1])
            result.warnings.append(f"{where}: {error['msg']} — this item was dropped")
        elif section in data:
            del data[section]
            result.warnings.append(f"{where}: {error['msg']} — the section was dropped")
    if result.errors:
        return False
    for section, items in dropped_items.items():
        data[section] = [item for i, item in enumerate(data[section]) if i not in items]
    return True


def _limited_surface(surface: str, limits: Limits, warnings: list[str]) -> str:
    if len(surface) > limits.max_surface_chars:
        warnings.append(
            f"surface_response has {len(surface)} characters; only the first {limits.max_surface_chars} are kept"
        )
        return surface[: limits.max_surface_chars]
    return surface
