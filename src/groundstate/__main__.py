"""``python -m groundstate`` runs the CLI.

``python -m`` puts the working directory first on ``sys.path``; a cloned repository's ``tomllib.py`` or ``yaml.py``
would then shadow the modules the commands import on first use. It is taken off before anything else is imported:
the working directory is data, not code (docs/security.md)."""

import os
import sys

if sys.path and sys.path[0] and os.path.abspath(sys.path[0]) == os.getcwd():
    del sys.path[0]

from groundstate.cli import main

main()
