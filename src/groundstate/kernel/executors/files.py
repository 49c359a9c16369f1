"""File executors. Every path goes through the workspace's race-free operations (no symlink followed, no file
with several hard links touched), so a model cannot reach outside the workspace however it names a file."""

from __future__ import annotations

from ...errors import ExecutorError
from .base import Action, Context, Outcome

MAX_READ_BYTES = 4 * 1024 * 1024
MAX_LISTED = 2000


def read_file(action: Action, context: Context) -> Outcome:
    data = context.workspace.read_bytes(action.target, MAX_READ_BYTES)
    return Outcome(True, context.bounded(data.decode("utf-8", "replace")))


def write_file(action: Action, context: Context) -> Outcome:
    content = action.text_field("content") if action.payload.strip().startswith("{") else action.payload
    data = content.encode("utf-8", "surrogatepass")
    context.workspace.write_bytes(action.target, data)
    return Outcome(True, f"wrote {len(data)} bytes to {action.target}")


def edit_file(action: Action, context: Context) -> Outcome:
    """Replace exactly one occurrence of ``old`` by ``new``: an ambiguous edit is refused, never guessed."""
    old, new = action.text_field("old"), action.text_field("new")
    raw = context.workspace.read_bytes(action.target, MAX_READ_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ExecutorError(f"{action.target} is not UTF-8 text; it is not edited") from None
    count = text.count(old) if old else 0
    if count != 1:
        where = "not found" if count == 0 else f"found {count} times"
        raise ExecutorError(f"the text to replace was {where} in {action.target}; it must occur exactly once")
    context.workspace.write_bytes(action.target, text.replace(old, new, 1).encode("utf-8", "surrogatepass"))
    return Outcome(True, f"edited {action.target}")


def delete_file(action: Action, context: Context) -> Outcome:
    context.workspace.unlink(action.target)
    return Outcome(True, f"deleted {action.target}")


def list_files(action: Action, context: Context) -> Outcome:
    names: list[str] = []
    for relative, _, _ in context.workspace.files(action.target or "."):
        names.append(relative)
        if len(names) >= MAX_LISTED:
            names.append(f"[listing cut at {MAX_LISTED} files]")
            break
    return Outcome(True, context.bounded("\n".join(names)))
