"""The console's /metrics: the runtime's and the kernel's metrics for Prometheus, behind the token unless the
configuration opens them; parsed by prometheus_client's parser."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ..runtime.conftest import Script, envelope
from .conftest import serving

FLOW = "name: m\nagents:\n  - id: writer_a\n    instructions: Write it.\n"


def test_metrics_need_the_token_and_count_the_consoles_runs(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Done. [STATUS: SUCCESS]")]}
    (tmp_path / "console.toml").write_text(f'[models]\nendpoints = ["{url}"]\n')  # runs an account starts may use it
    with serving(tmp_path, "--config", "console.toml") as console:
        assert httpx.get(f"{console.url}/metrics", timeout=10).status_code == 401  # a status, not a login page
        api = console.api()
        run_id = api.post("/api/runs", json={"workflow": FLOW, "model": f"openai-chat:m@{url}"}).json()["run_id"]
        for _ in range(300):
            if api.get(f"/api/runs/{run_id}").json()["status"] == "completed":
                break
            time.sleep(0.1)
        response = api.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(response.text) for s in family.samples}  # fmt: skip
    assert samples[("groundstate_runs_total", (("status", "completed"),))] == 1
    model_labels = (("model", f"openai-chat:m@{url}"), ("outcome", "ok"), ("provider", "openai-chat"))
    assert samples[("groundstate_model_calls_total", model_labels)] == 1


def test_metrics_open_needs_no_token(tmp_path: Path) -> None:
    (tmp_path / "open.toml").write_text("[metrics]\nopen = true\n")
    with serving(tmp_path, "--config", "open.toml") as console:
        response = httpx.get(f"{console.url}/metrics", timeout=10)
        assert response.status_code == 200 and "groundstate_runs" in response.text
        assert httpx.get(f"{console.url}/api/runs", timeout=10).status_code == 401  # only the metrics are open
