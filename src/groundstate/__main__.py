"""``python -m groundstate`` runs the CLI."""

from .cli import app

app()
