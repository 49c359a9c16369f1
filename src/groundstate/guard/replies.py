"""Rules over what passes through the gateway (``groundstate gateway --gate`` with ``[gateway] rules``): once a
reply's control packet has validated, and before any of its surface text is released, the packet becomes facts
(``replies.mg``: intent, confidence, tool requests, accepted updates, safety gates) and the user's rules decide; a
derived ``reply_refused(Reason)`` cuts the reply. Python reports the facts and obeys; it judges nothing.

What an attacker controls: the whole packet (a model wrote it). Its values become facts as data, never rule text;
the number of facts per reply is bounded by the packet's own limits (its tool requests and updates are bounded).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from ..logic import Float, Name
from .judged import OneAtATime


def shipped_rules() -> Path:
    """The shipped ``replies.mg`` (declarations only)."""
    return Path(str(resources.files("groundstate.guard") / "defaults" / "replies.mg"))


class ReplyPolicy:
    """The user's reply rules in a kernel of their own; ``refusals(packet)`` is what they derive for one reply."""

    def __init__(self, files: list[Path]) -> None:
        self._replies = OneAtATime([shipped_rules(), *files], "groundstate-replies-")
        self.kernel = self._replies.kernel

    def refusals(self, result: Any) -> list[str]:
        """The reasons the rules derive for refusing this reply (a ``PacketResult`` with a validated packet)."""
        with self._replies.judging(_facts(result)) as kernel:
            return [str(reason) for (reason,) in kernel.match("reply_refused", sort=True)]


def _facts(result: Any) -> list[tuple[str, tuple[Any, ...]]]:
    packet = result.packet
    intent = packet.intent_classification
    facts: list[tuple[str, tuple[Any, ...]]] = [
        ("reply_intent", (Name(intent.category), Name(intent.verb), intent.target, intent.constraint)),
        ("reply_confidence", (Float(intent.confidence),)),
    ]
    requests = (packet.model_extra or {}).get("tool_requests") or []
    for request in requests if isinstance(requests, list) else []:
        if isinstance(request, dict):
            facts.append(("reply_tool_request", (str(request.get("tool", "")), str(request.get("argument", "")))))
    facts += [("reply_update", (update.text,)) for update in result.accepted_updates]
    gates = packet.safety_gates
    asks = gates is not None and gates.requires_user_approval
    facts.append(("reply_asks_approval", (Name("/true" if asks else "/false"),)))
    if gates is not None and gates.dangerous_action_blocked:
        facts.append(("reply_blocked", (gates.dangerous_action_blocked,)))
    return list(dict.fromkeys(facts))


class RuledGate:
    """A packet gate whose accepted packet must also pass the reply rules before any surface text is released."""

    def __init__(self, gate: Any, policy: ReplyPolicy) -> None:
        self.gate, self.policy = gate, policy
        self.refused: str | None = None
        self._checked = False

    def feed(self, text: str) -> list[str]:
        """What the inner gate releases, once the rules let the packet through (nothing after a refusal)."""
        if self.refused is not None:
            return []
        released: list[str] = self.gate.feed(text)
        if not self._checked and self.gate.packet is not None:
            self._checked = True
            reasons = self.policy.refusals(self.gate.packet)
            if reasons:
                self.refused = "; ".join(reasons)
                return []
        return released

    def close(self) -> Any:
        """The inner gate's verdict, or the rules' refusal."""
        verdict = self.gate.close()
        if self.refused is not None:
            verdict.decision, verdict.reason = "aborted", f"the reply rules refused it: {self.refused}"
            verdict.packet = None  # a refused reply's packet is not handed on
        return verdict
