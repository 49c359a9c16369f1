"""``python -m groundstate`` runs the CLI."""

from .cli import main

main()
