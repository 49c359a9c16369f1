"""The two options every command that touches state takes, declared once: ``--config`` (the project configuration)
and ``--db`` (the store, over the configuration's ``store.url``)."""

from __future__ import annotations

import typer

CONFIG_OPTION = typer.Option(None, "--config", help="The project configuration (default: $GROUNDSTATE_CONFIG or "
                             "./groundstate.toml).")  # fmt: skip
DB_OPTION = typer.Option(None, "--db", envvar="GROUNDSTATE_DB", help="Database URL (default: $GROUNDSTATE_DB, else "
                         "the configuration's store.url, else SQLite in $GROUNDSTATE_HOME).")  # fmt: skip
EXECUTOR_OPTION = typer.Option(None, "--executor", help="Where runs are driven: local (this process) or "
                               "ray://HOST:PORT (a Ray cluster's head; default: the configuration's "
                               "executor.address).")  # fmt: skip
