"""groundstate: a deterministic integrity layer for LLM agents — the model proposes, logic decides.

``@groundstate.tool`` registers your own Python functions as tools (see ``groundstate.tools``)."""

from . import tools
from .tools import tool

__version__ = "0.1.0"
__all__ = ["__version__", "tool", "tools"]
