"""Searching the workspace: code by regular expression, files by glob."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

from .base import Action, Context, ExecutorError, Outcome

MAX_MATCHES = 500
MAX_FILE_BYTES = 1024 * 1024


def _files(context: Context, under: str) -> list[Path]:
    root = context.workspace.resolve(under or ".", must_exist=True)
    found: list[Path] = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        found += [Path(directory) / name for name in sorted(files)]
    return found


def search_code(action: Action, context: Context) -> Outcome:
    """Target is a regular expression; the payload may name a sub-directory as ``{"path": ...}``."""
    try:
        pattern = re.compile(action.target)
    except re.error as exc:
        raise ExecutorError(f"{action.target!r} is not a valid regular expression: {exc}") from None
    under = action.fields().get("path", "") if action.payload else ""
    matches: list[str] = []
    for path in _files(context, str(under)):
        if path.is_symlink() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue  # binary or unreadable: not code
        for number, line in enumerate(lines, 1):
            if pattern.search(line):
                matches.append(f"{context.workspace.relative(path)}:{number}: {line.strip()[:200]}")
                if len(matches) >= MAX_MATCHES:
                    matches.append(f"[search cut at {MAX_MATCHES} matches]")
                    return Outcome(True, context.bounded("\n".join(matches)))
    return Outcome(True, context.bounded("\n".join(matches) or "no matches"))


def search_files(action: Action, context: Context) -> Outcome:
    """Target is a glob matched against workspace-relative paths (``*.py``, ``src/**/test_*.py``)."""
    if not action.target:
        raise ExecutorError("search_files needs a glob pattern as its target")
    names = [context.workspace.relative(p) for p in _files(context, "")]
    hits = [n for n in names if fnmatch.fnmatch(n, action.target) or fnmatch.fnmatch(Path(n).name, action.target)]
    return Outcome(True, context.bounded("\n".join(hits[:MAX_MATCHES]) or "no files match"))
