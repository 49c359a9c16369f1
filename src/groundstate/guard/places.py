"""Where a call acts, as facts a user's rule can use: the files its arguments name (``mcp_path``: absolute and
normalised, symlinks of existing parts resolved), those inside the repository it names (``mcp_repo_file``: relative
to the repository's root) and that repository's current branch (``mcp_git_branch``) — so "writes under notes/ pass
unattended" or "nothing is committed on main" can be written as rules.

What an attacker controls: every argument (a model chose them). A path is normalised before a rule sees it
(``notes/../.git/config`` is ``.git/config``, a symlink ``notes -> /etc`` resolves to ``/etc``), a file outside the
repository gets no ``mcp_repo_file`` (it is never "under notes/"), and the only thing read from the disk is at most
256 bytes of the repository's ``.git/HEAD``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..logic import Name

# argument names that name a file or directory: the last part of a flattened key (list indexes skipped)
_PATH_NAMES = frozenset({"path", "paths", "file", "files", "filename", "source", "destination", "target", "directory"})
_PATH_SUFFIXES = ("_path", "_paths", "_file", "_files", "_dir")
REPOSITORY_KEYS = ("repo_path", "repository")  # mcp-server-git's argument, and the common spelling
MAX_HEAD_BYTES = 256
DETACHED = Name("/detached")


def place_facts(call: str, flattened: list[tuple[str, Any]]) -> list[tuple[str, tuple[Any, ...]]]:
    """``mcp_path``, ``mcp_repo_file`` and ``mcp_git_branch`` facts of one call from its flattened arguments."""
    repository = _repository(flattened)
    facts: list[tuple[str, tuple[Any, ...]]] = []
    for key, value in flattened:
        if not isinstance(value, str) or not value or "\0" in value or not _names_a_path(key):
            continue
        path = _normalised(value, repository)
        facts.append(("mcp_path", (call, key, path)))
        if repository is not None and key not in REPOSITORY_KEYS:
            inside = _relative(path, repository)
            if inside is not None:
                facts.append(("mcp_repo_file", (call, key, inside)))
    if repository is not None:
        branch = _branch(repository)
        if branch is not None:
            facts.append(("mcp_git_branch", (call, branch)))
    return facts


def _names_a_path(key: str) -> bool:
    parts = [part for part in key.split(".") if not part.isdigit()]
    last = parts[-1].casefold() if parts else ""
    return last in _PATH_NAMES or last.endswith(_PATH_SUFFIXES) or last in REPOSITORY_KEYS


def _repository(flattened: list[tuple[str, Any]]) -> str | None:
    """The repository the call names (an absolute path), resolved; None when it names none."""
    for key, value in flattened:
        if key in REPOSITORY_KEYS and isinstance(value, str) and os.path.isabs(value) and "\0" not in value:
            return os.path.realpath(value)
    return None


def _normalised(value: str, repository: str | None) -> str:
    """An absolute path when it can be one (a relative one is taken from the repository the call names), with
    ``..`` and symlinks of its existing parts resolved; else the relative path normalised."""
    if os.path.isabs(value):
        return os.path.realpath(value)
    if repository is not None:
        return os.path.realpath(os.path.join(repository, value))
    return os.path.normpath(value)


def _relative(path: str, repository: str) -> str | None:
    """``path`` relative to the repository's root, or None when it is not inside it (or is the root)."""
    if not os.path.isabs(path):
        return None
    inside = os.path.relpath(path, repository)
    return None if inside == "." or inside == ".." or inside.startswith("../") else inside


def _branch(repository: str) -> str | Name | None:
    """The repository's current branch (``main``), ``/detached`` for a detached HEAD, None when it is not a git
    repository the guard can read."""
    try:
        with (Path(repository) / ".git" / "HEAD").open("rb") as head:
            text = head.read(MAX_HEAD_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if text.startswith("ref: refs/heads/"):
        return text.removeprefix("ref: refs/heads/")
    return DETACHED if text else None
