"""Pause reasons lead with their cause: a cut-off, an unreachable model or a timeout before a generic failure; no
protocol violation for an agent whose attempt failed before it could do anything; a cut-off reads the same whether
the local model or a provider's stream hit the limit; the recovery hint is the leading cause's (naming the tool a
role must run). Which reason leads is the rules' ranking (``cause_rank`` in guards.mg) — one a user can extend."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundstate.config import ProjectConfig
from groundstate.runtime import (
    APPROVAL_REQUESTED,
    Answer,
    Event,
    EventStore,
    GuardKernel,
    LocalBackend,
    PinnedPolicy,
    Runtime,
    guard_rules,
    make_backend,
    parse_workflow,
)

from .conftest import Script, envelope
from .test_fallback import closed_port

RESEARCH = "name: r\nagents:\n  - id: research_a\n    instructions: Find the market size.\n    tools: [web_search]\n"
CUT_OFF = (
    "Cut off: the answer of agent 'research_a' reached the model's output-token limit and was cut off before it ended."
)


def cut_short(text: str) -> bytes:
    """A Chat Completions stream that stops at the output-token limit: half an envelope, finish_reason "length"."""
    chunks = [{"choices": [{"index": 0, "delta": {"content": text[: len(text) // 2]}, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}]  # fmt: skip
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def paused(runtime: Runtime) -> Event:
    run_id = runtime.create(RESEARCH, "r.yaml", "m")
    state = asyncio.run(runtime.drive(run_id))
    assert state.status == "awaiting_approval", state.outcome
    return next(e for e in runtime.store.events(run_id) if e.type == APPROVAL_REQUESTED)


def reasons(event: Event) -> list[str]:
    return [r["reason"] for r in event.payload["reasons"]]


def test_a_providers_cut_off_leads_and_no_protocol_violation_is_added(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script.answers = {"research_a": [cut_short(json.dumps(envelope("The market is worth " + "a lot " * 40)))]}
    runtime = Runtime(
        EventStore(f"sqlite:///{tmp_path / 'r.db'}"), tmp_path, backend=make_backend(f"openai-chat:m@{url}")
    )
    event = paused(runtime)
    assert event.payload["reason"] == CUT_OFF
    assert event.payload["hint"].startswith("Ask for a shorter answer in the instructions")
    assert not any(r.startswith(("Protocol violation", "Execution failure")) for r in reasons(event)), reasons(event)


def test_the_local_models_cut_off_reads_the_same(tmp_path: Path) -> None:
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'r.db'}"), tmp_path, backend=LocalBackend(max_tokens=6))
    event = paused(runtime)
    assert event.payload["reason"] == CUT_OFF  # the same sentence as through a provider's stream
    assert event.payload["hint"].startswith("Ask for a shorter answer in the instructions")
    assert not any(r.startswith("Protocol violation") for r in reasons(event)), reasons(event)


def test_an_unreachable_model_leads_with_the_transport_failure(tmp_path: Path) -> None:
    settings = ProjectConfig.model_validate({"models": {"default": f"openai-chat:gone@{closed_port()}"}})
    runtime = Runtime(EventStore(f"sqlite:///{tmp_path / 'r.db'}"), tmp_path, settings=settings)
    run_id = runtime.create(RESEARCH, "r.yaml")
    asyncio.run(runtime.drive(run_id))
    event = next(e for e in runtime.store.events(run_id) if e.type == APPROVAL_REQUESTED)
    assert event.payload["reason"].startswith("Execution failure in agent 'research_a': the model failed")
    assert event.payload["hint"].startswith("The model could not be reached")
    assert not any(r.startswith("Protocol violation") for r in reasons(event)), reasons(event)  # it never ran


def test_a_protocol_violations_hint_names_the_tool_to_use(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"research_a": [envelope("It is big. [STATUS: SUCCESS]")]}
    runtime = Runtime(
        EventStore(f"sqlite:///{tmp_path / 'r.db'}"), tmp_path, backend=make_backend(f"openai-chat:m@{url}")
    )
    event = paused(runtime)
    assert event.payload["reason"].startswith("Protocol violation: agent 'research_a' did not execute /web_search")
    assert event.payload["hint"].startswith("Name web_search in the instructions (e.g. 'Use web_search to find")


def kernel(tmp_path: Path, extra: str = "") -> GuardKernel:
    rules = tmp_path / "mine.mg"
    rules.write_text(extra)
    policy = PinnedPolicy.of(guard_rules([rules] if extra else []), [], None, None)
    (tmp_path / "ws").mkdir(exist_ok=True)
    return GuardKernel("run-1", parse_workflow(RESEARCH), tmp_path / "ws", policy, tmp_path / "k")


def test_a_cause_of_your_own_can_lead_and_a_causeless_rule_follows_the_shipped_ones(tmp_path: Path) -> None:
    mine = kernel(tmp_path, 'needs_approval(R, A, /quality, "mine, no cause") :- finished(R, A).\n')
    pause = mine.finished("research_a", "null", "none needed", [], None, Answer("x"))
    assert pause is not None and pause.first.reason.startswith("Semantic null")  # rank 4 before a causeless rule
    assert "mine, no cause" in [a.reason for a in pause.approvals]
    ranked = kernel(
        tmp_path, 'paused_for(R, A, /quality, /ours, "ours first") :- finished(R, A).\ncause_rank(/ours, 0).\n'
    )
    pause = ranked.finished("research_a", "null", "none needed", [], None, Answer("x"))
    assert pause is not None and pause.first.reason == "ours first"


KINDS = ["transport", "timeout", "cut_off", "provider", "backend", "packet", "tool_requests", "internal"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tag=st.sampled_from(["success", "null", "missing"]), bypass=st.booleans(), searched=st.booleans(),
       kind=st.sampled_from([None, *KINDS]),
       finish=st.sampled_from([None, "stop", "length", "content_filter"]))  # fmt: skip
def test_every_pause_leads_with_exactly_one_reason_of_the_lowest_rank_and_one_hint(
    tmp_path: Path, tag: str, bypass: bool, searched: bool, kind: str | None, finish: str | None
) -> None:
    from groundstate.runtime import Signals

    guards = kernel(tmp_path)
    signals = Signals(finish=finish)
    pause = guards.finished("research_a", tag, "b" if bypass else None, ["web_search"] if searched else [],
                            "it failed" if kind else None, Answer("out", signals=signals),
                            error_kind=kind or "failure")  # fmt: skip
    if pause is None:
        return
    ranks = {str(c).lstrip("/"): n for c, n in guards.kernel.query("cause_rank(C, N)")}
    causes = {
        r: str(c).lstrip("/") for _, _, _, c, r in guards.kernel.query('paused_for("run-1", "research_a", _, C, R)')
    }
    lowest = min(ranks.get(causes.get(a.reason, ""), 6) for a in pause.approvals if a.category == pause.first.category)
    assert ranks.get(causes.get(pause.first.reason, ""), 6) == lowest
    assert pause.hint  # exactly one (pause() refuses anything else)
    if kind is not None or finish == "length":
        assert not any(a.reason.startswith("Protocol violation") for a in pause.approvals)
