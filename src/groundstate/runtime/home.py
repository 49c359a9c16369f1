"""Where groundstate keeps its state (see ``config.home``); kept here for the runtime's public face."""

from __future__ import annotations

from ..config import default_db_url, home

__all__ = ["default_db_url", "home"]
