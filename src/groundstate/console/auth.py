"""The console's credentials: one token, created on first start, kept in ``$GROUNDSTATE_HOME/console.token`` (0600).

Browsers log in once (the token is checked, a session cookie is set: HttpOnly, SameSite=Strict); API clients send
``Authorization: Bearer <token>``. Requests authenticated by the cookie that change state must also carry the CSRF
token (a form field or the ``X-CSRF-Token`` header), which pages embed: a cross-site form cannot know it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

TOKEN_FILE = "console.token"
COOKIE = "groundstate_session"


def load_or_create_token(home: Path) -> tuple[str, bool]:
    """(token, created): a new token is written with mode 0600 before anything can read it."""
    path = home / TOKEN_FILE
    if path.exists():
        return path.read_text(encoding="utf-8").strip(), False
    token = secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token, True


def derived(token: str, purpose: str) -> str:
    """A value bound to the token (the session cookie, the CSRF token), so neither reveals the token itself."""
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())
