"""The scripted model provider the runtime tests use, for the replay of runs."""

from ..runtime.conftest import model  # noqa: F401 - the fixture, by name
