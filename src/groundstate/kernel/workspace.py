"""Confinement to a workspace root: the only way executors turn a model-supplied target into a path.

Refused with a clear error: absolute paths, any ``..`` component, NUL bytes, and paths that resolve (through
symlinks) outside the root. Resolution happens at the moment of use.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

INSIDE, OUTSIDE, INVALID = "/inside", "/outside", "/invalid"


class WorkspaceError(ValueError):
    """A target that is not a path inside the workspace."""


class Workspace:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve(strict=True)
        if not self.root.is_dir():
            raise WorkspaceError(f"the workspace root {root} is not a directory")

    def resolve(self, target: str, *, must_exist: bool = False) -> Path:
        """The real path of ``target`` inside the workspace; raises WorkspaceError otherwise."""
        problem = _syntax_problem(target)
        if problem:
            raise WorkspaceError(f"{target!r}: {problem}")
        path = (self.root / target).resolve(strict=False)
        if path != self.root and self.root not in path.parents:
            raise WorkspaceError(f"{target!r} resolves to {path}, outside the workspace {self.root} (symlink?)")
        if must_exist and not path.exists():
            raise WorkspaceError(f"{target!r} does not exist in the workspace")
        return path

    def status(self, target: str) -> str:
        """INSIDE, OUTSIDE (escapes through a symlink) or INVALID (absolute, ``..``, NUL, empty)."""
        if _syntax_problem(target):
            return INVALID
        try:
            self.resolve(target)
        except WorkspaceError:
            return OUTSIDE
        return INSIDE

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() or "."


def _syntax_problem(target: str) -> str | None:
    if not target:
        return "an empty path"
    if "\x00" in target:
        return "a NUL byte in the path"
    if os.path.isabs(target) or target.startswith(("/", "\\", "~")) or (len(target) > 1 and target[1] == ":"):
        return "absolute paths are not allowed; give a path relative to the workspace"
    if ".." in PurePosixPath(target.replace("\\", "/")).parts:
        return "'..' is not allowed in workspace paths"
    return None
