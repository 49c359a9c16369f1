"""groundstate.console — the operator console (web UI and HTTP API) and the ``groundstate demo`` job."""
