"""git on the workspace repository: status, diff, log, commit."""

from __future__ import annotations

from ...errors import ExecutorError
from .base import Action, Context, Outcome
from .processes import git

MAX_LOG = 200


def _paths(action: Action, context: Context) -> list[str]:
    if not action.target or action.target == "codebase":
        return []
    return ["--", context.workspace.relative(context.workspace.resolve(action.target))]


def git_status(action: Action, context: Context) -> Outcome:
    return git(["status", "--porcelain=v1", "--branch"], context)


def git_diff(action: Action, context: Context) -> Outcome:
    return git(["diff", "--no-color", "--no-ext-diff", *_paths(action, context)], context)


def git_log(action: Action, context: Context) -> Outcome:
    count = action.fields().get("count", 20) if action.payload else 20
    if not isinstance(count, int) or not 0 < count <= MAX_LOG:
        raise ExecutorError(f"count must be an integer from 1 to {MAX_LOG}")
    return git(["log", f"-n{count}", "--format=%h %ad %an %s", "--date=iso-strict", *_paths(action, context)], context)


def git_commit(action: Action, context: Context) -> Outcome:
    """Commit everything in the workspace (``git add -A``) with the payload's ``message``."""
    message = action.text_field("message") if action.payload.strip().startswith("{") else action.payload
    if not message.strip():
        raise ExecutorError("git_commit needs a commit message in its payload")
    added = git(["add", "-A"], context)
    if not added.ok:
        return added
    return git(["commit", "-m", message], context)
