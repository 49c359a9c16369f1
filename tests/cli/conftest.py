from __future__ import annotations

from ..runtime.conftest import model  # noqa: F401 - the scripted provider fixture
