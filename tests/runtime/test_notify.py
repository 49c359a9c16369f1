"""``[notify]``: a webhook hears of pauses, completions, failures and aborts — each a JSON POST signed with
HMAC-SHA256 over "timestamp.body" (checked here with hmac, independently of the code that signs), retried with
backoff on a 5xx or no connection under the same delivery id, not retried on another 4xx, given up after
``max_attempts``; only the configured ``events`` are sent; a webhook without its secret is refused at start."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundstate.config import ProjectConfig
from groundstate.errors import ConfigurationError
from groundstate.runtime import EventStore, Runtime, make_backend

from ..loopback import Reply, loopback
from .conftest import Script
from .test_open_pauses import DONE, NULL, TWO_WRITERS

SECRET = "s3cret-for-tests"


class Receiver:
    """A webhook receiver on loopback: answers each POST with the next status of ``statuses`` (the last repeats)."""

    def __init__(self) -> None:
        self.statuses: list[int] = [200]
        self.delay = 0.0
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()

    def respond(self, _path: str, headers: dict[str, str], body: bytes) -> Reply:
        with self.lock:
            self.posts.append(({k.lower(): v for k, v in headers.items()}, body))
            status = self.statuses[min(len(self.posts) - 1, len(self.statuses) - 1)]
        return Reply(status, {"content-type": "application/json"}, b"{}", delay=self.delay)

    def verified(self) -> list[dict[str, Any]]:
        """Every post whose signature checks out, as JSON (a post that does not check out fails the test)."""
        out = []
        for headers, body in self.posts:
            stamp, digest = (part.split("=", 1)[1] for part in headers["x-groundstate-signature"].split(","))
            expected = hmac.new(SECRET.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
            assert hmac.compare_digest(digest, expected), "a post whose signature does not check out"
            assert abs(int(stamp) - time.time()) < 60
            out.append({**json.loads(body), "_delivery": headers["x-groundstate-delivery"]})
        return out


@pytest.fixture
def receiver() -> Iterator[tuple[str, Receiver]]:
    hook = Receiver()
    with loopback(hook.respond) as url:
        yield url, hook


def runtime_for(tmp_path: Path, model_url: str, notify: dict[str, Any]) -> Runtime:
    settings = ProjectConfig.model_validate({"notify": notify})
    return Runtime(EventStore(f"sqlite:///{tmp_path / 'n.db'}"), tmp_path, settings=settings,
                   backend=make_backend(f"openai-chat:m@{model_url}"))  # fmt: skip


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDSTATE_WEBHOOK_SECRET", SECRET)


def test_pauses_and_an_abort_are_posted_signed_and_retried_after_a_500(
    tmp_path: Path, model: tuple[str, Script], receiver: tuple[str, Receiver]
) -> None:
    url, hook = receiver
    hook.statuses = [500, 200]  # the first delivery fails once, then everything is accepted
    model[1].answers = {"writer_a": [NULL], "writer_b": [NULL]}
    runtime = runtime_for(tmp_path, model[0], {"webhook": url, "backoff_sec": 0.05,
                                               "console_url": "https://console.example/"})  # fmt: skip
    run_id = runtime.create(TWO_WRITERS)
    state = asyncio.run(runtime.drive(run_id))
    runtime.decide(run_id, "abort", actor="operator:dana", pause=state.pauses[0].id)
    runtime.close()
    posts = hook.verified()
    assert [p["event"] for p in posts] == ["paused", "paused", "paused", "aborted"]  # the first one twice
    assert posts[0]["_delivery"] == posts[1]["_delivery"] and len({p["_delivery"] for p in posts}) == 3
    paused = {p["agent"]: p for p in posts[1:3]}
    assert set(paused) == {"writer_a", "writer_b"}
    for agent, post in paused.items():
        assert post["run_id"] == run_id and post["run"] == "two-writers"
        assert post["pause"]["reason"].startswith(f"Semantic null: agent '{agent}'")
        assert post["link"] == f"https://console.example/runs/{run_id}#pause-{post['pause']['pause']}"
    assert posts[3]["reason"] == "aborted by operator:dana"


def test_only_the_configured_events_are_sent(
    tmp_path: Path, model: tuple[str, Script], receiver: tuple[str, Receiver]
) -> None:
    url, hook = receiver
    model[1].answers = {"writer_a": [NULL, DONE], "writer_b": [DONE]}
    runtime = runtime_for(tmp_path, model[0], {"webhook": url, "events": ["completed"]})
    run_id = runtime.create(TWO_WRITERS)
    state = asyncio.run(runtime.drive(run_id))
    runtime.decide(run_id, "retry", pause=state.pauses[0].id)
    asyncio.run(runtime.drive(run_id))
    runtime.close()
    posts = hook.verified()
    assert [p["event"] for p in posts] == ["completed"]  # the pause was not sent
    assert posts[0]["summary"] == {"writer_a": "succeeded", "writer_b": "succeeded"}


def test_a_delivery_is_given_up_after_max_attempts_and_a_4xx_is_not_retried(
    tmp_path: Path, model: tuple[str, Script], receiver: tuple[str, Receiver]
) -> None:
    url, hook = receiver
    model[1].answers = {"writer_a": [DONE], "writer_b": [DONE]}
    hook.statuses = [503]
    runtime = runtime_for(tmp_path, model[0], {"webhook": url, "max_attempts": 3, "backoff_sec": 0.01})
    asyncio.run(runtime.drive(runtime.create(TWO_WRITERS)))
    runtime.close()
    assert len(hook.posts) == 3 and runtime.notifier is not None
    assert [(d.kind, error) for d, error in runtime.notifier.given_up] == [("completed", "HTTP 503")]
    hook.posts.clear()
    hook.statuses = [403]
    asyncio.run(runtime.drive(runtime.create(TWO_WRITERS)))
    runtime.close()
    assert len(hook.posts) == 1  # the receiver refuses it: asking again would not help


def test_an_attempt_longer_than_timeout_sec_fails_and_is_retried(
    tmp_path: Path, model: tuple[str, Script], receiver: tuple[str, Receiver]
) -> None:
    url, hook = receiver
    hook.delay = 1.0
    model[1].answers = {"writer_a": [DONE], "writer_b": [DONE]}
    runtime = runtime_for(tmp_path, model[0], {"webhook": url, "timeout_sec": 0.2, "max_attempts": 2,
                                               "backoff_sec": 0.01})  # fmt: skip
    asyncio.run(runtime.drive(runtime.create(TWO_WRITERS)))
    runtime.close()
    assert runtime.notifier is not None
    [(_, error)] = runtime.notifier.given_up
    assert error.startswith("ReadTimeout")


def test_a_webhook_without_its_secret_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: tuple[str, Script]
) -> None:
    monkeypatch.delenv("GROUNDSTATE_WEBHOOK_SECRET")
    with pytest.raises(ConfigurationError, match=r"\$GROUNDSTATE_WEBHOOK_SECRET is empty"):
        runtime_for(tmp_path, model[0], {"webhook": "http://127.0.0.1:9/hook"})
    monkeypatch.setenv("TEAM_HOOK_KEY", SECRET)  # secret_env names another variable
    runtime = runtime_for(tmp_path, model[0], {"webhook": "http://127.0.0.1:9/hook", "secret_env": "TEAM_HOOK_KEY"})
    assert runtime.notifier is not None and runtime.notifier.secret == SECRET.encode()


def test_a_notification_a_stopped_process_left_is_sent_by_the_next_one(
    tmp_path: Path, model: tuple[str, Script], receiver: tuple[str, Receiver]
) -> None:
    """The notification is a row of the store's outbox before it is sent: a process that stopped before sending
    leaves it pending, and the next process with the webhook sends it, under the same delivery id."""
    url, hook = receiver
    model[1].answers = {"writer_a": [NULL], "writer_b": [NULL]}
    first = runtime_for(tmp_path, model[0], {"webhook": url})
    assert first.notifier is not None
    first.notifier._queue = lambda delivery: None  # type: ignore[method-assign]  # it stops before it sends
    run_id = first.create(TWO_WRITERS)
    asyncio.run(first.drive(run_id))
    assert hook.posts == []
    assert first.notifier.outbox is not None
    pending = first.notifier.outbox.pending(url)
    assert [kind for _, kind, _ in pending] == ["paused", "paused"]
    second = runtime_for(tmp_path, model[0], {"webhook": url})  # starts: sends what was left
    second.close()
    posts = hook.verified()
    assert sorted(p["_delivery"] for p in posts) == sorted(delivery for delivery, _, _ in pending)
    assert {p["run_id"] for p in posts} == {run_id}
    assert second.notifier is not None and second.notifier.outbox is not None
    assert {second.notifier.outbox.status(d) for d, _, _ in pending} == {("delivered", 1, None)}
    third = runtime_for(tmp_path, model[0], {"webhook": url})
    third.close()
    assert len(hook.posts) == 2  # delivered ones are not sent again


def test_a_notification_another_live_process_holds_is_not_sent_twice(
    tmp_path: Path, model: tuple[str, Script], receiver: tuple[str, Receiver]
) -> None:
    url, hook = receiver
    runtime = runtime_for(tmp_path, model[0], {"webhook": url})
    assert runtime.notifier is not None and runtime.notifier.outbox is not None
    outbox = runtime.notifier.outbox
    outbox.add("held-elsewhere", "paused", url, b'{"event": "paused"}')
    assert outbox.claim("held-elsewhere", 60)  # another process is sending it
    assert runtime.notifier.resume() == 0 and not outbox.claim("held-elsewhere", 60)
    outbox.add("lapsed", "paused", url, b'{"event": "paused"}')
    assert outbox.claim("lapsed", -1)  # its process died: the claim has lapsed
    assert runtime.notifier.resume() == 1
    runtime.close()
    assert [p["_delivery"] for p in hook.verified()] == ["lapsed"]
    assert outbox.status("held-elsewhere") == ("pending", 0, None) and outbox.status("lapsed") == ("delivered", 1, None)
