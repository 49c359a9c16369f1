"""Shadow rules: ``[mcp] shadow`` names a candidate's rule files, decided beside the enforced policy on every call
and never obeyed. Each disagreement is a line on the guard's stderr, a field of the ledger row (the console's
tool-calls page shows it) and a Prometheus counter on the console's /metrics."""

from __future__ import annotations

import json
from pathlib import Path

from mcp.client.session import ClientSession
from prometheus_client.parser import text_string_to_metric_families

from groundstate.config import default_db_url
from groundstate.guard import Ledger

from ..console.conftest import serving
from .test_mcp_guard import TIME, guarded

CANDIDATE = 'mcp_denied(C, "the candidate keeps Tokyo out") :- mcp_argument(C, "timezone", "Asia/Tokyo").\n'


def test_the_shadow_policy_is_decided_beside_and_never_obeyed(tmp_path: Path) -> None:
    (tmp_path / "candidate.mg").write_text(CANDIDATE)

    async def use(client: ClientSession) -> tuple[str, str]:
        tokyo = await client.call_tool("time__get_current_time", {"timezone": "Asia/Tokyo"})
        london = await client.call_tool("time__get_current_time", {"timezone": "Europe/London"})
        return tokyo.content[0].text, london.content[0].text  # type: ignore[union-attr]

    (tokyo, london), stderr = guarded(tmp_path, TIME + '[mcp]\nshadow = ["candidate.mg"]\n', use, stderr=True)
    assert '"timezone": "Asia/Tokyo"' in tokyo and "Europe/London" in london  # the enforced policy permitted both
    assert ("shadow: time/get_current_time (entry 1) was decided permit; the shadow policy would deny: the candidate "
            "keeps Tokyo out") in stderr  # fmt: skip
    assert stderr.count("shadow:") == 1  # London: both agree, nothing said
    entries = {entry.id: entry for entry in Ledger(default_db_url(tmp_path / "home")).entries()}
    assert entries[1].decision == "permit" and entries[1].shadow == {"decision": "deny",
                                                                     "reasons": ["the candidate keeps Tokyo out"]}
    assert entries[1].disagrees and not entries[2].disagrees and entries[2].shadow is not None

    with serving(tmp_path) as console:  # the same store: the tool-calls page and /metrics
        api = console.api()
        page = api.get("/calls").text
        metrics = api.get("/metrics").text
    assert "Shadow policy: would deny — the candidate keeps Tokyo out" in page
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(metrics) for s in family.samples}  # fmt: skip
    assert samples[("groundstate_mcp_shadow_disagreements_total", (("decision", "permit"), ("shadow", "deny")))] == 1


def test_without_a_shadow_policy_nothing_is_kept_or_said(tmp_path: Path) -> None:
    async def use(client: ClientSession) -> str:
        done = await client.call_tool("time__get_current_time", {"timezone": "Asia/Tokyo"})
        return done.content[0].text  # type: ignore[union-attr]

    _, stderr = guarded(tmp_path, TIME, use, stderr=True)
    assert "shadow" not in stderr
    [entry] = Ledger(default_db_url(tmp_path / "home")).entries()
    assert entry.shadow is None and json.dumps(entry.to_json())  # served as JSON, shadow null


def test_a_shadow_file_that_does_not_parse_is_refused_at_its_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "candidate.mg").write_text("mcp_denied(C, R) :- \n")
    (tmp_path / "groundstate.toml").write_text(TIME + '[mcp]\nshadow = ["candidate.mg"]\n')
    done = subprocess.run([sys.executable, "-m", "groundstate", "config", "check", "--config",
                           str(tmp_path / "groundstate.toml")], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "mcp.shadow" in done.stderr and "candidate.mg" in done.stderr, done.stderr


def test_a_shadow_that_would_take_hours_is_cut_off_once_and_dropped(tmp_path: Path) -> None:
    (tmp_path / "slow.mg").write_text(
        "n(0) :- mcp_call(_, _, _, _, _).\nn(M) :- n(N), :lt(N, 3000), M = fn:plus(N, 1).\n"
        "never(C) :- mcp_call(C, _, _, _, _), n(A), n(B), n(D), X = fn:plus(A, B), Y = fn:plus(X, D), :lt(Y, -1).\n"
        'mcp_denied(C, "slow") :- never(C).\n')  # fmt: skip  # 3000 cubed rows: found by an attack helper

    async def use(client: ClientSession) -> list[str]:
        answers = []
        for zone in ("Asia/Tokyo", "Europe/London"):
            done = await client.call_tool("time__get_current_time", {"timezone": zone})
            answers.append(done.content[0].text)  # type: ignore[union-attr]
        return answers

    answers = guarded(tmp_path, TIME + '[mcp]\nshadow = ["slow.mg"]\n', use)
    assert "Asia/Tokyo" in answers[0] and "Europe/London" in answers[1]  # both answered: the shadow held up nothing
    entries = {entry.id: entry for entry in Ledger(default_db_url(tmp_path / "home")).entries()}
    assert entries[1].shadow is not None and entries[1].shadow["decision"] == "error"
    assert "time limit of 0.25 s" in entries[1].shadow["reasons"][0]
    assert entries[2].shadow is None  # dropped after it failed once: no call pays for it again
