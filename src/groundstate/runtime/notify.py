"""Notifications: a webhook told when a run pauses, completes, fails or is aborted, so a team can route pauses to
chat or paging.

Each notification is one JSON POST, signed: ``X-Groundstate-Signature: t=UNIX,sha256=HEX`` where HEX is the
HMAC-SHA256, keyed with the secret from the environment variable ``[notify] secret_env`` names, of ``"UNIX." +
body``; the receiver recomputes it and checks the time to refuse replays. A delivery that fails (no connection,
a 5xx, 408 or 429) is retried with doubling waits from ``backoff_sec``, at most ``max_attempts`` times, under the
same ``X-Groundstate-Delivery`` id so a receiver can drop duplicates; another 4xx is not retried.

Deliveries go out from a background thread, in order, so no driver waits on a slow receiver; ``flush`` waits for
them before a command exits. Each notification is first a row of the store's outbox (``outbox.py``): one a stopped
process did not send is sent by the next process that starts with the webhook (``resume``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import Engine

from ..config import NotifyConfig
from ..errors import ConfigurationError
from . import run_events as ev
from .outbox import DELIVERED, GIVEN_UP, Outbox

SIGNATURE = "X-Groundstate-Signature"
DELIVERY = "X-Groundstate-Delivery"
KINDS = {ev.APPROVAL_REQUESTED: "paused", ev.RUN_COMPLETED: "completed", ev.RUN_FAILED: "failed",
         ev.RUN_ABORTED: "aborted"}  # fmt: skip
RETRIED_STATUSES = (408, 429)
log = logging.getLogger("groundstate.notify")


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    """The signature header's value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},sha256={digest}"


@dataclass(frozen=True)
class Delivery:
    """One notification: its kind, its body, and the id its retries share."""

    kind: str
    body: bytes
    id: str


class Webhook:
    """The runtime's listener that posts notifications to ``[notify] webhook``."""

    def __init__(self, config: NotifyConfig, secret: bytes, name_of: Callable[[str], str],
                 sleep: Callable[[float], None] = time.sleep, outbox: Outbox | None = None) -> None:  # fmt: skip
        if config.webhook is None:
            raise ConfigurationError("notify: no webhook is configured")
        self.config, self.url, self.secret = config, config.webhook, secret
        self.name_of = name_of  # a run's workflow name, for the message
        self.sleep = sleep
        self.pending: queue.Queue[Delivery] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.given_up: list[tuple[Delivery, str]] = []  # deliveries that failed every attempt, and the last error
        self.outbox = outbox  # where each notification is kept until it is delivered or given up

    @classmethod
    def configured(
        cls, config: NotifyConfig, name_of: Callable[[str], str], engine: Engine | None = None
    ) -> Webhook | None:
        """The configuration's webhook (None when none is set), its outbox in ``engine``'s database;
        ConfigurationError when its secret is missing — unsigned notifications would let anyone who knows the URL
        forge a pause."""
        if config.webhook is None:
            return None
        secret = os.environ.get(config.secret_env, "")
        if not secret:
            raise ConfigurationError(f"notify.webhook is set but ${config.secret_env} is empty: give the webhook's "
                                     "signing secret in it (notify.secret_env names the variable)")  # fmt: skip
        return cls(config, secret.encode(), name_of, outbox=Outbox(engine) if engine is not None else None)

    def __call__(self, event: ev.Event) -> None:
        """A run event: queued for delivery when it is one of the configured kinds."""
        kind = KINDS.get(event.type)
        if kind is None or kind not in self.config.events:
            return
        delivery = Delivery(kind, json.dumps(self.message(kind, event), ensure_ascii=False).encode(), uuid.uuid4().hex)
        if self.outbox is not None:
            self.outbox.add(delivery.id, kind, self.url, delivery.body)
        self._queue(delivery)

    def resume(self) -> int:
        """Queue the outbox's pending notifications to this webhook that no live process holds (left by a process
        that stopped before it sent them); how many."""
        left = self.outbox.pending(self.url) if self.outbox is not None else []
        for delivery, kind, body in left:
            self._queue(Delivery(kind, body, delivery))
        return len(left)

    def _queue(self, delivery: Delivery) -> None:
        self.pending.put(delivery)
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._work, name="groundstate-webhook", daemon=True)
            self.thread.start()

    def message(self, kind: str, event: ev.Event) -> dict[str, Any]:
        """The notification's JSON: what happened, to which run, and what the operator needs to act."""
        p = event.payload
        message: dict[str, Any] = {"event": kind, "run_id": event.run_id, "run": self.name_of(event.run_id),
                                   "seq": event.seq, "at": event.at.isoformat(), "agent": event.agent}  # fmt: skip
        if kind == "paused":
            others = [r["reason"] for r in p.get("reasons", []) if r["reason"] != p.get("reason")]
            message["pause"] = {"pause": event.seq, "category": p.get("category"), "reason": p.get("reason"),
                                "hint": p.get("hint"), "others": others}  # fmt: skip
        elif kind == "completed":
            message["summary"] = p.get("summary")
        else:
            message["reason"] = p.get("error") if kind == "failed" else p.get("reason")
        if self.config.console_url:
            anchor = f"#pause-{event.seq}" if kind == "paused" else ""
            message["link"] = f"{self.config.console_url.rstrip('/')}/runs/{event.run_id}{anchor}"
        return message

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait up to ``timeout`` seconds for every queued notification to be delivered or given up; True if none is
        left."""
        deadline = time.monotonic() + timeout
        with self.pending.all_tasks_done:
            while self.pending.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.pending.all_tasks_done.wait(left)
        return True

    def _budget(self) -> float:
        """How long every attempt at one notification may take: its claim lasts that long, and a little more."""
        waits = sum(self.config.backoff_sec * float(2**k) for k in range(self.config.max_attempts - 1))
        return float(waits + self.config.max_attempts * self.config.timeout_sec + 5.0)

    def _work(self) -> None:
        while True:
            try:
                delivery = self.pending.get(timeout=5)
            except queue.Empty:
                return
            try:
                self._deliver(delivery)
            finally:
                self.pending.task_done()

    def _deliver(self, delivery: Delivery) -> None:
        if self.outbox is not None and not self.outbox.claim(delivery.id, self._budget()):
            return  # delivered or given up meanwhile, or another live process is sending it
        error, attempt = "", 0
        for attempt in range(self.config.max_attempts):
            if attempt:
                self.sleep(self.config.backoff_sec * 2 ** (attempt - 1))
            stamp = int(time.time())
            headers = {"content-type": "application/json", SIGNATURE: signature(self.secret, stamp, delivery.body),
                       DELIVERY: delivery.id, "X-Groundstate-Event": delivery.kind}  # fmt: skip
            try:
                answer = httpx.post(self.url, content=delivery.body, headers=headers, timeout=self.config.timeout_sec)
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
                continue
            if answer.status_code < 300:
                if self.outbox is not None:
                    self.outbox.close(delivery.id, DELIVERED, attempt + 1, None)
                return
            error = f"HTTP {answer.status_code}"
            if answer.status_code < 500 and answer.status_code not in RETRIED_STATUSES:
                break  # the receiver refuses it: another attempt would be refused too
        self.given_up.append((delivery, error))
        if self.outbox is not None:
            self.outbox.close(delivery.id, GIVEN_UP, attempt + 1, error)
        log.warning("webhook %s: gave up on the %s notification %s (%s)", self.url, delivery.kind, delivery.id, error)
