"""The operator console: a FastAPI application with an HTTP API under ``/api/`` and server-rendered pages.

``create_app`` only assembles: the security middlewares (``security``), what the console does to runs
(``operations``), the API router (``api``), the pages router (``pages``); how a run is shown lives in ``views``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST

from .. import tracing
from ..runtime import INTERRUPTED, RUNNING, Executor, Runtime
from ..store import Operators
from . import api, pages, problems, security
from .operations import EXAMPLES, Operations

__all__ = ["EXAMPLES", "create_app"]


def create_app(runtime: Runtime, token: str, executor: Executor | None = None) -> FastAPI:
    """The console for ``runtime``: ``token`` (the state directory's ``console.token``) is its key and becomes the
    first admin account; every request is authenticated to an operator account (see ``security``). Runs it starts
    or unpauses are driven by ``executor`` (default: in this process)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        ops = app.state.operations
        sweepers = [asyncio.create_task(_expire_pauses(ops))]
        if ops.executor.remote:  # a cluster: runs whose driver was lost are handed to another
            sweepers.append(asyncio.create_task(_take_over_interrupted(ops)))
        try:
            yield
        finally:
            for sweeper in sweepers:
                sweeper.cancel()
            await asyncio.gather(*sweepers, return_exceptions=True)
            await asyncio.to_thread(ops.executor.close)
            await asyncio.to_thread(runtime.close)  # notifications still being delivered
            await asyncio.to_thread(tracing.flush)  # the last spans, before the process ends

    app = FastAPI(title="groundstate console", version="1", docs_url="/api/docs", openapi_url="/api/openapi.json",
                  redoc_url=None, lifespan=lifespan)  # fmt: skip
    app.mount("/static", StaticFiles(directory=str(pages.HERE / "static")), name="static")
    metrics_open = (security.METRICS,) if runtime.settings.metrics.open else ()
    operators = Operators(runtime.store.url, first_admin_token=token)
    security.install(app, security.Secrets(token, operators), metrics_open)
    problems.install(app)
    app.state.operations = Operations(runtime, operators, executor)
    app.include_router(api.router)
    app.include_router(pages.router)

    @app.get(security.METRICS, include_in_schema=False)
    def metrics() -> PlainTextResponse:
        """The kernel's and the runtime's metrics for Prometheus (behind the token unless ``metrics.open``), and the
        MCP guard's shadow disagreements from its ledger (``[mcp] shadow``)."""
        shadow = _shadow_metric(app.state.operations.ledger.disagreements())
        return PlainTextResponse(runtime.run_metrics.render() + shadow, media_type=CONTENT_TYPE_LATEST)

    return app


def _shadow_metric(counted: Counter[tuple[str, str]]) -> str:
    """``groundstate_mcp_shadow_disagreements_total``: calls the shadow policy would have decided otherwise, by the
    decision made and the shadow's, in Prometheus' text format (the ledger is the count: it survives restarts)."""
    lines = ["# HELP groundstate_mcp_shadow_disagreements_total Calls through the MCP guard that the shadow policy "
             "([mcp] shadow) would have decided otherwise.",
             "# TYPE groundstate_mcp_shadow_disagreements_total counter"]  # fmt: skip
    lines += [f'groundstate_mcp_shadow_disagreements_total{{decision="{made}",shadow="{would}"}} {count}'
              for (made, would), count in sorted(counted.items())]  # fmt: skip
    return "\n".join(lines) + "\n"


async def _expire_pauses(ops: Operations) -> None:
    """``[approvals] timeout_sec``: every few seconds, the pauses that waited too long get their decision (the
    runtime asks approvals.mg which); a run that goes on is driven here, like one an operator decided."""
    timeout = ops.runtime.settings.approvals.timeout_sec
    if timeout is None:
        return
    interval = min(max(timeout / 4, 0.5), 5.0)
    while True:
        await asyncio.sleep(interval)
        try:
            decided = await asyncio.to_thread(ops.runtime.expire_pauses)
        except Exception as exc:  # a store hiccup must not end the sweeps; the next one tries again
            print(f"approval timeouts: {type(exc).__name__}: {exc}", flush=True)
            continue
        for run_id, _, _ in decided:
            if ops.runtime.store.state(run_id).status == RUNNING:
                ops.drive(run_id)


async def _take_over_interrupted(ops: Operations) -> None:
    """With a cluster executor: every third of a lease, a running run whose driver's lease has lapsed (its node or
    the process that owned its driver is gone) gets a new segment; the new driver resumes it from the store."""
    while True:
        await asyncio.sleep(ops.runtime.lease_seconds / 3)
        try:
            rows = await asyncio.to_thread(ops.runtime.store.runs)
        except Exception as exc:  # a store hiccup must not end the sweeps; the next one tries again
            print(f"take-over: {type(exc).__name__}: {exc}", flush=True)
            continue
        for row in rows:
            if row["status"] == INTERRUPTED:
                ops.drive(row["id"])
