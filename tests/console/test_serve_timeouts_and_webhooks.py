"""``groundstate serve`` applies the configuration's approval timeouts on its own (the pauses nobody decided get
their decision, the run goes on in the console's process) and posts its runs' notifications to the webhook."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ..loopback import loopback
from ..runtime.conftest import Script
from ..runtime.test_notify import SECRET, Receiver
from ..runtime.test_open_pauses import NULL, TWO_WRITERS
from .conftest import serving


def test_serve_decides_timed_out_pauses_and_notifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: tuple[str, Script]
) -> None:
    hook = Receiver()
    with loopback(hook.respond) as hook_url:
        served(tmp_path, monkeypatch, model, hook, hook_url)
    assert sorted(p["event"] for p in hook.verified()) == ["completed", "paused", "paused"]


def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: tuple[str, Script], hook: Receiver,
           hook_url: str) -> None:  # fmt: skip
    model_url, script = model
    script.answers = {"writer_a": [NULL], "writer_b": [NULL]}
    monkeypatch.setenv("GROUNDSTATE_WEBHOOK_SECRET", SECRET)
    (tmp_path / "groundstate.toml").write_text(f'[models]\ndefault = "openai-chat:m@{model_url}"\n'
                                               '[approvals]\ntimeout_sec = 1\ndefault_decision = "skip"\n'
                                               f'[notify]\nwebhook = "{hook_url}"\n')  # fmt: skip
    with serving(tmp_path, "--config", "groundstate.toml") as console:  # named: a working-directory file is data
        api = console.api()
        run_id = api.post("/api/runs", json={"workflow": TWO_WRITERS}).json()["run_id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and api.get(f"/api/runs/{run_id}").json()["status"] != "completed":
            time.sleep(0.2)
        run = api.get(f"/api/runs/{run_id}").json()
        assert run["status"] == "completed", run
        assert {node["status"] for node in run["nodes"].values()} == {"skipped"}
        events = api.get(f"/api/runs/{run_id}/events").json()
        assert {e["actor"] for e in events if e["type"] == "ApprovalDecided"} == {"policy:approval_timeout"}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(hook.posts) < 3:
            time.sleep(0.1)
