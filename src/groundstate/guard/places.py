"""Where a call acts, as facts a user's rule can use: the files its arguments name (``mcp_path``), those inside the
repository it names (``mcp_repo_file``: relative to the repository's root) and that repository's current branch
(``mcp_git_branch``) — so "writes under notes/ pass unattended" or "nothing is committed on main" can be written as
rules.

What an attacker controls: every argument (a model chose them), and the files of a repository it can write. So:

- a path is reported as the text resolves it (``notes/l/../../src`` is ``src``, as git reads a pathspec) and, when
  the disk resolves it elsewhere (a symlink on the way), as the disk resolves it too; a file is inside the repository
  (``mcp_repo_file``) only when both agree and both are inside — a symlink never makes a file "under notes/";
- the repository is the call's ``repo_path`` (mcp-server-git's argument) and nothing else: another key naming a
  repository is just a path; a relative one is taken from the guard's working directory, which a stdio upstream
  inherits;
- a repository whose branch cannot be read (no git directory, a worktree's pointer that leads nowhere) is on the
  branch ``/unknown``, never on none: a rule about ``main`` must not pass a call because a fact went missing;
- the only thing read from the disk is at most 256 bytes of a ``HEAD`` file (and of a worktree's ``.git`` pointer).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..logic import Name

# argument names that name a file or directory: the last part of a flattened key (list indexes skipped)
_PATH_NAMES = frozenset({"path", "paths", "file", "files", "filename", "source", "destination", "target", "directory",
                         "repository"})  # fmt: skip
_PATH_SUFFIXES = ("_path", "_paths", "_file", "_files", "_dir")
REPOSITORY_KEY = "repo_path"  # mcp-server-git's argument: the one key that names the call's repository
MAX_HEAD_BYTES = 256
DETACHED, UNKNOWN = Name("/detached"), Name("/unknown")


def place_facts(call: str, flattened: list[tuple[str, Any]]) -> list[tuple[str, tuple[Any, ...]]]:
    """``mcp_path``, ``mcp_repo_file`` and ``mcp_git_branch`` facts of one call from its flattened arguments."""
    repository = _repository(flattened)
    facts: list[tuple[str, tuple[Any, ...]]] = []
    for key, value in flattened:
        if not isinstance(value, str) or not value or "\0" in value or not _names_a_path(key):
            continue
        textual, physical = _resolved(value, repository)
        facts.append(("mcp_path", (call, key, textual)))
        if physical != textual:
            facts.append(("mcp_path", (call, key, physical)))
        if repository is not None and key != REPOSITORY_KEY:
            inside = _inside(textual, physical, repository)
            if inside is not None:
                facts.append(("mcp_repo_file", (call, key, inside)))
    if repository is not None:
        facts.append(("mcp_git_branch", (call, _branch(repository))))
    return facts


def _names_a_path(key: str) -> bool:
    parts = [part for part in key.split(".") if not part.isdigit()]
    last = parts[-1].casefold() if parts else ""
    return last in _PATH_NAMES or last.endswith(_PATH_SUFFIXES)


def _repository(flattened: list[tuple[str, Any]]) -> str | None:
    """The repository the call names in its top-level ``repo_path``, absolute (a relative one from the working
    directory the upstream inherits) and normalised as text; None when it names none."""
    for key, value in flattened:
        if key == REPOSITORY_KEY and isinstance(value, str) and value and "\0" not in value:
            return os.path.normpath(os.path.abspath(value))
    return None


def _resolved(value: str, repository: str | None) -> tuple[str, str]:
    """The path as its text resolves it (``..`` taken lexically, as git does with a pathspec) and as the disk does
    (symlinks of its existing parts followed): absolute when it can be — a relative one is taken from the repository
    the call names — else both the relative path normalised."""
    if not os.path.isabs(value) and repository is None:
        return os.path.normpath(value), os.path.normpath(value)
    joined = value if os.path.isabs(value) else os.path.join(repository or "", value)
    return os.path.normpath(joined), os.path.realpath(joined)


def _inside(textual: str, physical: str, repository: str) -> str | None:
    """The file's path relative to the repository's root when its text and the disk agree on it — None when either
    puts it outside (or at the root), or they disagree (a symlink on the way)."""
    by_text = _relative(textual, repository)
    by_disk = _relative(physical, os.path.realpath(repository))
    return by_text if by_text is not None and by_text == by_disk else None


def _relative(path: str, root: str) -> str | None:
    if not os.path.isabs(path):
        return None
    inside = os.path.relpath(path, root)
    return None if inside in (".", "..") or inside.startswith("../") else inside


def _branch(repository: str) -> str | Name:
    """The repository's current branch (``main``), ``/detached`` for a detached HEAD, ``/unknown`` when it cannot be
    read (no git directory here, a worktree whose pointer leads nowhere, an unreadable HEAD)."""
    head = _head_file(Path(repository))
    if head is None:
        return UNKNOWN
    text = _read(head)
    if text is None or not text:
        return UNKNOWN
    if text.startswith("ref: refs/heads/"):
        return text.removeprefix("ref: refs/heads/")
    return DETACHED if not text.startswith("ref:") else UNKNOWN


def _head_file(repository: Path) -> Path | None:
    """The HEAD of the repository at ``repository``: its ``.git/HEAD``; a worktree's or submodule's, whose ``.git``
    is a file pointing at its git directory; or ``repository/HEAD`` when it is a git directory itself."""
    dot_git = repository / ".git"
    if dot_git.is_dir():
        return dot_git / "HEAD"
    if dot_git.is_file():
        pointer = _read(dot_git)
        if pointer is None or not pointer.startswith("gitdir: "):
            return None
        target = Path(pointer.removeprefix("gitdir: "))
        return (target if target.is_absolute() else repository / target) / "HEAD"
    if (repository / "HEAD").is_file() and (repository / "objects").is_dir():
        return repository / "HEAD"
    return None


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as file:
            return file.read(MAX_HEAD_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return None
