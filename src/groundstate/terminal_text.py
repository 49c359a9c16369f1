"""What the command line prints is shown, never obeyed.

Text a command prints comes from a model, a web page, a tool's result, a workflow or configuration file, or a store
someone else can write. A terminal acts on some characters instead of showing them: an escape sequence clears the
screen, retitles the window, conceals text or moves the cursor; a carriage return overwrites the line it is on; a
bidirectional override or an invisible character makes one run id or command look like another. Every such
character is written as its ``\\uXXXX`` escape — a form that is also valid inside a JSON string, so ``--json``
output stays JSON.

One path for all of it: ``cli.main`` puts ``SafeStream`` in front of standard output and error (``typer.echo``,
``print``, every JSON line), and the commands' Rich consoles are ``terminal_console.SafeConsole``, which escapes the
text of what it renders but keeps its own styling (Rich writes around the stream, through ``rich_proxied_file``).
This module imports nothing heavy: a command's ``--help`` starts without Rich.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import IO, Any

# C0 controls but tab and newline, DEL and C1 controls, invisible and bidirectional formatting characters, the line
# and paragraph separators, the byte-order mark, and lone surrogates (an undecodable byte of a file name)
_ACTED_ON = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ud800-\udfff]")
_ACTED_ON_OR_NEWLINE = re.compile(_ACTED_ON.pattern[:-1] + "\n\t]")


def _escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character a terminal would act on written as its escape; ``one_line``: newlines and
    tabs too (a field that is one line — a run id, a pause's reason in a listing — cannot forge a line of its own)."""
    return (_ACTED_ON_OR_NEWLINE if one_line else _ACTED_ON).sub(_escape, text)


class SafeStream:
    """A text stream that writes what it is given through ``terminal_safe``; everything else is the stream's."""

    def __init__(self, raw: IO[str]) -> None:
        self.raw = raw

    @property
    def rich_proxied_file(self) -> IO[str]:
        """Where a Rich console writes instead (its own escape sequences are its styling; SafeConsole escapes the
        text it renders)."""
        return self.raw

    def write(self, text: str) -> int:
        self.raw.write(terminal_safe(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer, ...
        return getattr(self.raw, name)


def guard_standard_streams() -> None:
    """Put ``SafeStream`` in front of standard output and error, once (the CLI's entry point)."""
    if not isinstance(sys.stdout, SafeStream):
        sys.stdout = SafeStream(sys.stdout)
    if not isinstance(sys.stderr, SafeStream):
        sys.stderr = SafeStream(sys.stderr)
