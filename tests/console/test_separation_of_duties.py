"""Separation of duties, with two accounts through the console's API: the account that started a run may not decide
its pauses (access.mg; a 409 naming why), another account may; ``[access] self_approval`` lets a named account
decide its own — a team of one says so explicitly."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from ..runtime.conftest import Script, envelope
from .conftest import serving

NULL = envelope("Nothing to write from. [STATUS: NULL]")  # a semantic null: the run pauses
ONE = """
name: one
agents:
  - id: writer_brief
    instructions: Write the brief.
"""


def paused(api: httpx.Client, model_url: str) -> tuple[str, dict[str, Any]]:
    """A run started through ``api`` and its first open pause, once it has one."""
    created = api.post("/api/runs", json={"workflow": ONE, "model": f"openai-chat:m@{model_url}"})
    assert created.status_code == 201, created.text
    run_id = created.json()["run_id"]
    for _ in range(300):
        run = api.get(f"/api/runs/{run_id}").json()
        if run["pauses"]:
            return run_id, run["pauses"][0]
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} never paused: {run}")


def test_the_account_that_started_a_run_does_not_decide_its_pauses(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_brief": [NULL, envelope("Done. [STATUS: SUCCESS]")]}
    (tmp_path / "console.toml").write_text(f'[models]\nendpoints = ["{url}"]\n')
    with serving(tmp_path, "--config", "console.toml") as console:
        olga = console.api(console.account("olga", "operator"))
        run_id, pause = paused(olga, url)
        assert olga.get(f"/api/runs/{run_id}").json()["created_by"] == "operator:olga"
        own = olga.post(f"/api/runs/{run_id}/decision", json={"pause": pause["pause"], "decision": "skip"})
        assert own.status_code == 409
        assert own.json()["detail"] == (f"run {run_id}, pause {pause['pause']}: operator olga asked for this "
                                        "themselves: another account decides it (or name olga in [access] "
                                        "self_approval)")  # fmt: skip
        still = olga.get(f"/api/runs/{run_id}").json()["pauses"]
        assert [p["pause"] for p in still] == [pause["pause"]]  # still open: nothing was recorded
        other = console.api().post(f"/api/runs/{run_id}/decision", json={"pause": pause["pause"], "decision": "skip"})
        assert other.status_code == 200, other.text  # the admin, another account, decides it


def test_self_approval_names_the_accounts_that_may_decide_their_own(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_brief": [NULL, envelope("Done. [STATUS: SUCCESS]")]}
    (tmp_path / "console.toml").write_text(f'[models]\nendpoints = ["{url}"]\n[access]\nself_approval = ["olga"]\n')
    with serving(tmp_path, "--config", "console.toml") as console:
        olga = console.api(console.account("olga", "operator"))
        run_id, pause = paused(olga, url)
        own = olga.post(f"/api/runs/{run_id}/decision", json={"pause": pause["pause"], "decision": "skip"})
        assert own.status_code == 200, own.text
