"""groundstate: a deterministic integrity layer for LLM agents — the model proposes, logic decides."""

__version__ = "0.1.0"
