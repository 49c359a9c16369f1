"""The operator console: a FastAPI application with an HTTP API under ``/api/`` and server-rendered pages.

``create_app`` only assembles: the security middlewares (``security``), what the console does to runs
(``operations``), the API router (``api``), the pages router (``pages``); how a run is shown lives in ``views``.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST

from ..runtime import Runtime
from ..store import Operators
from . import api, pages, security
from .operations import EXAMPLES, Operations

__all__ = ["EXAMPLES", "create_app"]


def create_app(runtime: Runtime, token: str) -> FastAPI:
    """The console for ``runtime``: ``token`` (the state directory's ``console.token``) is its key and becomes the
    first admin account; every request is authenticated to an operator account (see ``security``)."""
    app = FastAPI(title="groundstate console", version="1", docs_url="/api/docs", openapi_url="/api/openapi.json",
                  redoc_url=None)  # fmt: skip
    app.mount("/static", StaticFiles(directory=str(pages.HERE / "static")), name="static")
    metrics_open = (security.METRICS,) if runtime.settings.metrics.open else ()
    operators = Operators(runtime.store.url, first_admin_token=token)
    security.install(app, security.Secrets(token, operators), metrics_open)
    app.state.operations = Operations(runtime, operators)
    app.include_router(api.router)
    app.include_router(pages.router)

    @app.get(security.METRICS, include_in_schema=False)
    def metrics() -> PlainTextResponse:
        """The kernel's and the runtime's metrics for Prometheus (behind the token unless ``metrics.open``)."""
        return PlainTextResponse(runtime.run_metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return app
