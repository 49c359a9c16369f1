"""File executors, all confined to the workspace."""

from __future__ import annotations

import os
from pathlib import Path

from .base import Action, Context, ExecutorError, Outcome

MAX_READ_BYTES = 4 * 1024 * 1024
MAX_LISTED = 2000


def read_file(action: Action, context: Context) -> Outcome:
    path = context.workspace.resolve(action.target, must_exist=True)
    if not path.is_file():
        raise ExecutorError(f"{action.target} is not a file")
    size = path.stat().st_size
    if size > MAX_READ_BYTES:
        raise ExecutorError(f"{action.target} has {size} bytes; files over {MAX_READ_BYTES} bytes are not read")
    return Outcome(True, context.bounded(path.read_bytes().decode("utf-8", "replace")))


def write_file(action: Action, context: Context) -> Outcome:
    path = context.workspace.resolve(action.target)
    content = action.text_field("content") if action.payload.strip().startswith("{") else action.payload
    if path.is_dir():
        raise ExecutorError(f"{action.target} is a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    context.workspace.resolve(action.target)  # again: a symlink may have appeared on the way
    _write_new(path, content)
    return Outcome(True, f"wrote {len(content.encode())} bytes to {action.target}")


def edit_file(action: Action, context: Context) -> Outcome:
    """Replace exactly one occurrence of ``old`` by ``new``: an ambiguous edit is refused, never guessed."""
    path = context.workspace.resolve(action.target, must_exist=True)
    old, new = action.text_field("old"), action.text_field("new")
    text = path.read_text(encoding="utf-8")
    count = text.count(old) if old else 0
    if count != 1:
        where = "not found" if count == 0 else f"found {count} times"
        raise ExecutorError(f"the text to replace was {where} in {action.target}; it must occur exactly once")
    _write_new(path, text.replace(old, new, 1))
    return Outcome(True, f"edited {action.target}")


def delete_file(action: Action, context: Context) -> Outcome:
    path = context.workspace.resolve(action.target, must_exist=True)
    if path.is_dir():
        raise ExecutorError(f"{action.target} is a directory; only files are deleted")
    path.unlink()
    return Outcome(True, f"deleted {action.target}")


def list_files(action: Action, context: Context) -> Outcome:
    root = context.workspace.resolve(action.target or ".", must_exist=True)
    if not root.is_dir():
        raise ExecutorError(f"{action.target} is not a directory")
    names: list[str] = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d != ".git")
        for name in sorted(files):
            names.append(context.workspace.relative(Path(directory) / name))
            if len(names) >= MAX_LISTED:
                names.append(f"[listing cut at {MAX_LISTED} files]")
                return Outcome(True, context.bounded("\n".join(names)))
    return Outcome(True, context.bounded("\n".join(names)))


def _write_new(path: Path, content: str) -> None:
    """Write without following a symlink planted at the final component."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise ExecutorError(f"cannot write {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(content)
