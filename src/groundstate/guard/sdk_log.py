"""The ``mcp`` SDK's log records as one line each on the guard's stderr, never a traceback.

The SDK logs what goes wrong inside its client and server with ``logger.exception`` — an HTTP upstream's answer it
cannot parse, a session it cannot read — and with no logging configured Python prints those records with their whole
traceback. An MCP client shows the guard's stderr as its log, so a hostile upstream could fill it with tracebacks
(and its own bytes, quoted in the error). Each record becomes one line: the logger, the message, the error's type
and first line, control characters escaped, at most ``MAX_LINE`` characters."""

from __future__ import annotations

import logging
import sys

MAX_LINE = 1000  # characters of one logged line: an error may quote a whole upstream answer
SDK_LOGGER = "mcp"


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            first = next(iter(str(error).splitlines()), "")
            text = f"{text}: {type(error).__name__}: {first}"
        shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in f"{record.name}: {text}")
        if len(shown) > MAX_LINE:
            shown = shown[:MAX_LINE] + f"… ({len(shown) - MAX_LINE} characters cut)"
        return f"groundstate mcp guard: {shown}"


def one_line_sdk_logs() -> None:
    """Route the SDK's warnings and errors to stderr as one line each (see the module); once per process."""
    logger = logging.getLogger(SDK_LOGGER)
    if any(getattr(handler, "_groundstate", False) for handler in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    handler.setLevel(logging.WARNING)
    handler._groundstate = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False
