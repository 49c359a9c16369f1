"""A stopped console (SIGTERM: what a service manager sends) ends within its grace even while a browser follows a
run's event stream — a stream that never ends held the shutdown for as long as the browser stayed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from ..runtime.conftest import Script, envelope
from .conftest import serving

FLOW = "name: m\nagents:\n  - id: writer_a\n    instructions: Write it.\n"


def test_a_followed_event_stream_does_not_hold_the_shutdown(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [envelope("Done. [STATUS: SUCCESS]")]}
    (tmp_path / "console.toml").write_text(f'[models]\nendpoints = ["{url}"]\n')
    with serving(tmp_path, "--config", "console.toml") as console:
        api = console.api()
        run_id = api.post("/api/runs", json={"workflow": FLOW, "model": f"openai-chat:m@{url}"}).json()["run_id"]
        opened = threading.Event()

        def follow() -> None:
            headers = {"Authorization": f"Bearer {console.token}"}
            try:
                with httpx.stream("GET", f"{console.url}/api/runs/{run_id}/stream", headers=headers,
                                  timeout=120) as stream:  # fmt: skip
                    opened.set()
                    for _ in stream.iter_bytes():
                        pass
            except httpx.HTTPError:
                pass  # the server closed it

        threading.Thread(target=follow, daemon=True).start()
        assert opened.wait(30)
        time.sleep(0.5)
        assert console.process is not None
        began = time.monotonic()
        console.process.terminate()
        console.process.wait(timeout=60)
        assert time.monotonic() - began < 20, "the console kept serving the stream after it was told to stop"
