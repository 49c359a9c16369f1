"""groundstate.console — the operator console (web UI and HTTP API) and the ``groundstate demo`` job.

app = create_app(Runtime(...), load_or_create_token(home()))   # an ASGI app: uvicorn.run(app)
"""

from .app import create_app
from .auth import load_or_create_token

__all__ = ["create_app", "load_or_create_token"]
