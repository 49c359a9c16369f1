"""Which approvals pause at a checkpoint and which one a pause leads with are derived by guards.mg, not Python."""

from __future__ import annotations

from pathlib import Path

from groundstate.logic import Name
from groundstate.runtime import Answer, GuardKernel, PinnedPolicy, Signals, Spent, guard_rules, parse_workflow

FLOW = parse_workflow("""
name: ranked
agents:
  - id: coder_a
    instructions: Compute it.
    tools: [execute_python]
""")
RULES = """
needs_approval(R, A, /safety, "S: code ran") :- tool_call(R, A, _, /execute_python, _).
needs_approval(R, A, /quality, "Q: some tool was called") :- tool_call(R, A, _, _, _).
needs_approval(R, A, /quality, "P: another quality reason") :- tool_call(R, A, _, _, _).
"""


def guards(tmp_path: Path, extra: str = "") -> GuardKernel:
    (tmp_path / "ws").mkdir(exist_ok=True)
    shipped = guard_rules([])
    policy = PinnedPolicy.of(shipped + RULES + extra, [])  # the rules under test join the shipped guard rules
    return GuardKernel("run-1", FLOW, tmp_path / "ws", policy, tmp_path / "state")


def test_at_a_tool_call_only_safety_pauses(tmp_path: Path) -> None:
    kernel = guards(tmp_path)
    assert kernel.preflight("coder_a", {}, 0) is None
    pause = kernel.tool_call("coder_a", 7, "execute_python", "print(1)")
    assert pause is not None
    assert (pause.first.category, pause.first.reason) == ("safety", "S: code ran")
    assert [(a.category, a.reason) for a in pause.approvals] == [("safety", "S: code ran")]


def test_when_finished_every_category_pauses_and_safety_leads(tmp_path: Path) -> None:
    kernel = guards(tmp_path)
    kernel.preflight("coder_a", {}, 0)
    kernel.tool_call("coder_a", 7, "execute_python", "print(1)")
    pause = kernel.finished("coder_a", "success", None, ["execute_python"], None)
    assert pause is not None and pause.first.reason == "S: code ran"
    assert {a.reason for a in pause.approvals} == {
        "S: code ran",
        "Q: some tool was called",
        "P: another quality reason",
    }


def test_the_rank_in_the_rules_decides_what_leads(tmp_path: Path) -> None:
    """A user's rule ranking quality first changes the pause; ties within a category go to the first reason."""
    kernel = guards(tmp_path, "pause_rank(/quality, 0).\n")
    kernel.preflight("coder_a", {}, 0)
    kernel.tool_call("coder_a", 7, "execute_python", "print(1)")
    pause = kernel.finished("coder_a", "success", None, ["execute_python"], None)
    assert pause is not None and (pause.first.category, pause.first.reason) == ("quality", "P: another quality reason")


def test_a_checkpoint_the_rules_do_not_pause_at_goes_on(tmp_path: Path) -> None:
    """Without pause_checkpoint(/tool_call, /safety) even a safety approval does not hold the call."""
    kernel = guards(tmp_path)
    with kernel.kernel.transaction() as tx:
        tx.retract("pause_checkpoint", (Name("/tool_call"), Name("/safety")))
    assert kernel.tool_call("coder_a", 7, "execute_python", "print(1)") is None


def test_a_runs_total_past_what_a_fact_holds_is_over_any_budget_not_an_error(tmp_path: Path) -> None:
    """Each attempt's counts are at most 2^53 - 1 (providers.token_count), but a run of a thousand agents at that
    count totals past a fact's 64-bit integer: the total is then the largest a fact holds — over any budget the
    rules compare it with — not an internal error that failed every later agent of the run."""
    kernel = guards(tmp_path, "needs_approval(R, A, /quality, \"over\") :- finished(R, A), run_usage(R, T, _), "
                            "T > 9000000000000000000.\n")
    kernel.preflight("coder_a", {}, 0)
    total = Spent(tokens=1024 * (2**53 - 1), seconds=2.0**70, cost=0.0, wall_seconds=2.0**70)
    answer = Answer("done", "m", usage=(2**53 - 1, 2**64, 2**80))
    pause = kernel.finished("coder_a", "success", None, ["execute_python"], None, answer, total)
    assert pause is not None and [a.reason for a in pause.approvals] == ["over"]


def test_a_tool_call_said_only_by_the_stop_reason_pauses_once(tmp_path: Path) -> None:
    """The provider ends the answer as a tool call ("tool_calls", Anthropic's "tool_use") but no call was read — its
    shape was one no adapter reads: the run pauses on it as a native call (it completed, found by an attack); a call
    that was read pauses once, naming it."""
    kernel = guards(tmp_path)
    kernel.preflight("coder_a", {}, 0)
    unread = Answer("", "m", Signals(finish="tool_calls"))
    pause = kernel.finished("coder_a", "missing", None, ["execute_python"], None, unread)
    assert pause is not None
    assert [a.reason for a in pause.approvals if a.reason.startswith("Protocol violation")] == [
        "Protocol violation: the provider ended the answer of agent 'coder_a' as a native tool call, in a form that "
        "could not be read; tools are requested in control_packet.tool_requests, so nothing ran."]
    kernel.preflight("coder_a", {}, 0)
    read = Answer("", "m", Signals(native_tool_calls=["delete_file"], finish="tool_calls"))
    pause = kernel.finished("coder_a", "missing", None, ["execute_python"], None, read)
    assert pause is not None
    assert [a.reason for a in pause.approvals if a.reason.startswith("Protocol violation")] == [
        "Protocol violation: agent 'coder_a' called delete_file as a native tool call; tools are requested in "
        "control_packet.tool_requests, so it did not run."]


def test_a_refusal_said_only_by_the_stop_reason_pauses_once(tmp_path: Path) -> None:
    """Anthropic says a refusal by its stop reason, with no refusal text: the run pauses on it (it completed — no
    rule read /refusal, found by an attack); a refusal with its text pauses once, on the text."""
    kernel = guards(tmp_path)
    kernel.preflight("coder_a", {}, 0)
    silent = Answer("", "m", Signals(finish="refusal"))
    pause = kernel.finished("coder_a", "missing", None, ["execute_python"], None, silent)
    assert pause is not None
    assert [a.reason for a in pause.approvals if a.reason.startswith("Refusal")] == [
        "Refusal: the provider stopped the answer of agent 'coder_a' as a refusal, without its text."]
    kernel.preflight("coder_a", {}, 0)
    worded = Answer("", "m", Signals(refusals=["I will not."], finish="refusal"))
    pause = kernel.finished("coder_a", "missing", None, ["execute_python"], None, worded)
    assert pause is not None
    assert [a.reason for a in pause.approvals if a.reason.startswith("Refusal")] == [
        "Refusal: the model of agent 'coder_a' refused: I will not."]
