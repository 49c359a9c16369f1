"""The operator console: a FastAPI application with an HTTP API under ``/api/`` and server-rendered pages.

``create_app`` only assembles: the security middlewares (``security``), what the console does to runs
(``operations``), the API router (``api``), the pages router (``pages``); how a run is shown lives in ``views``.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from ..runtime import Runtime
from . import api, pages, security
from .operations import EXAMPLES, Operations

__all__ = ["EXAMPLES", "create_app"]


def create_app(runtime: Runtime, token: str) -> FastAPI:
    """The console for ``runtime``, guarded by ``token`` (see ``auth`` for how browsers and clients use it)."""
    app = FastAPI(title="groundstate console", version="1", docs_url="/api/docs", openapi_url="/api/openapi.json",
                  redoc_url=None)  # fmt: skip
    app.mount("/static", StaticFiles(directory=str(pages.HERE / "static")), name="static")
    security.install(app, security.Secrets.of(token))
    app.state.operations = Operations(runtime)
    app.include_router(api.router)
    app.include_router(pages.router)
    return app
