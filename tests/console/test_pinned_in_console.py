"""The issue's scenario, through the console: a run created under a custom safety rule pauses on a forbidden write;
the console is restarted without that rule in its configuration, the operator executes (retry) there, and the
agent's next forbidden write — another call, which the operator's approval of the first does not cover — pauses
again: the pinned rule still holds, and nothing is written."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from ..runtime.conftest import Script, envelope
from .conftest import Console, serving

FLOW = "name: secret\nagents:\n  - id: writer_a\n    instructions: Write the plan.\n    tools: [write_file]\n"
REASON = "A file named secret is about to be written."


def wait_for_pause(api: httpx.Client, run_id: str) -> dict[str, Any]:
    for _ in range(300):
        run = api.get(f"/api/runs/{run_id}").json()
        if run["status"] == "awaiting_approval":
            return dict(run)
        time.sleep(0.1)
    raise AssertionError(f"the run did not pause: {run}")


def test_a_custom_rule_holds_after_execute_in_a_restarted_console(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Writing.", [{"tool": "write_file", "argument": "secret-plan.txt",
                                                          "content": "the plan"}]),
                                   envelope("Writing.", [{"tool": "write_file", "argument": "secret-notes.txt",
                                                          "content": "the notes"}])]}  # fmt: skip
    (tmp_path / "patterns.json").write_text(json.dumps([{
        "id": "no_secret_files", "name": "No secret files", "trigger_event": "ToolCall", "category": "safety",
        "condition": 'tool_call(Run, Agent, Seq, /write_file, T), :string:contains(T, "secret")',
        "action": {"RequestApproval": {"reason": REASON}}}]))  # fmt: skip
    (tmp_path / "strict.toml").write_text(f'[models]\ndefault = "openai-chat:m@{url}"\n'
                                          '[policy]\npatterns = ["patterns.json"]\n')  # fmt: skip
    (tmp_path / "plain.toml").write_text(f'[models]\ndefault = "openai-chat:m@{url}"\n')
    console: Console
    with serving(tmp_path, "--config", "strict.toml") as console:
        api = console.api()
        run_id = api.post("/api/runs", json={"workflow": FLOW}).json()["run_id"]
        [held] = wait_for_pause(api, run_id)["pauses"]
        assert held["reason"] == REASON
    with serving(tmp_path, "--config", "plain.toml") as console:  # the rule is not in this console's configuration
        api = console.api(console.account("dana", "operator"))
        decided = api.post(f"/api/runs/{run_id}/decision", json={"pause": held["pause"], "decision": "retry"})
        assert decided.status_code == 200, decided.text
        time.sleep(0.5)
        [again] = wait_for_pause(api, run_id)["pauses"]
        assert again["reason"] == REASON and again["category"] == "safety" and again["pause"] != held["pause"]
    assert len(script.requests) == 2  # asked again; the new write was held like the first
    assert not list((console.home / "runs" / run_id / "workspace").glob("secret*"))
