"""Searching the workspace: code by regular expression, files by glob.

The model writes the expression, so it is compiled by RE2 (``google-re2``), whose matching is linear in the text:
a pattern like ``(a+)+$`` cannot stall the kernel's process as it does Python's backtracking ``re``. RE2 has no
back-references or look-around; such a pattern is refused with RE2's reason.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import re2

from ...errors import ExecutorError
from ..workspace import WorkspaceError
from .base import Action, Context, Outcome

MAX_MATCHES = 500
MAX_FILE_BYTES = 1024 * 1024
MAX_LINE_CHARS = 4096  # a pattern is matched against at most this much of a line


def search_code(action: Action, context: Context) -> Outcome:
    """Target is a regular expression; the payload may name a sub-directory as ``{"path": ...}``."""
    try:
        pattern = re2.compile(action.target)
    except re2.error as exc:
        raise ExecutorError(f"{action.target!r} is not a valid regular expression: {exc}") from None
    under = action.fields().get("path", "") if action.payload else ""
    matches: list[str] = []
    for relative, dir_fd, name in context.workspace.files(str(under or "."), skip_hidden=True):
        try:
            text = context.workspace.read_entry(dir_fd, name, relative, MAX_FILE_BYTES).decode("utf-8")
        except (WorkspaceError, OSError, UnicodeDecodeError):
            continue  # binary, unreadable, hard-linked or too large: not code
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line[:MAX_LINE_CHARS]):
                matches.append(f"{relative}:{number}: {line.strip()[:200]}")
                if len(matches) >= MAX_MATCHES:
                    matches.append(f"[search cut at {MAX_MATCHES} matches]")
                    return Outcome(True, context.bounded("\n".join(matches)))
    return Outcome(True, context.bounded("\n".join(matches) or "no matches"))


def search_files(action: Action, context: Context) -> Outcome:
    """Target is a glob matched against workspace-relative paths (``*.py``, ``src/**/test_*.py``)."""
    if not action.target:
        raise ExecutorError("search_files needs a glob pattern as its target")
    names = [relative for relative, _, _ in context.workspace.files(".", skip_hidden=True)]
    hits = [n for n in names if fnmatch.fnmatch(n, action.target) or fnmatch.fnmatch(Path(n).name, action.target)]
    return Outcome(True, context.bounded("\n".join(hits[:MAX_MATCHES]) or "no files match"))
