"""The console's credentials: one token, created on first start, kept in ``$GROUNDSTATE_HOME/console.token`` (0600).

Browsers log in once (the token is checked, a session cookie is set: HttpOnly, SameSite=Strict); API clients send
``Authorization: Bearer <token>``. Requests authenticated by the cookie that change state must also carry the CSRF
token (a form field or the ``X-CSRF-Token`` header), which pages embed: a cross-site form cannot know it.
"""

from __future__ import annotations

import hashlib
import hmac

from ..config import TOKEN_FILE, load_or_create_token

COOKIE = "groundstate_session"

__all__ = ["COOKIE", "TOKEN_FILE", "derived", "load_or_create_token", "same"]


def derived(token: str, purpose: str) -> str:
    """A value bound to the token (the session cookie, the CSRF token), so neither reveals the token itself."""
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())
