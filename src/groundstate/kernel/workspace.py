"""Confinement to a workspace root: the only way executors turn a model-supplied target into a file.

Targets are checked for syntax first (absolute paths, ``..``, NUL bytes, over-long names are refused). Every file
operation then opens the path relative to a directory fd of the root with no symlink followed at any component:
``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` where the kernel has it, a component-by-component
``O_NOFOLLOW`` walk otherwise. There is no check-then-open window for a swapped-in symlink to win, and files with
more than one hard link are refused (a hard link is a way to a file outside). ``status`` is the advisory view the
policy sees; enforcement is in the open.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import TypeVar

from ..errors import PolicyError
from . import openat2

INSIDE, OUTSIDE, INVALID = "/inside", "/outside", "/invalid"
T = TypeVar("T")
MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 255
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a planted FIFO cannot hang us


class WorkspaceError(PolicyError, ValueError):
    """A target that is not a usable path inside the workspace; the message says why."""


class Workspace:
    """The one directory actions may touch. Every target is resolved inside it (no absolute path, no '..',
    no symlink or hard link leading out), and refused with the reason otherwise."""

    def __init__(self, root: str | Path, *, use_openat2: bool | None = None) -> None:
        self.root = Path(root).resolve(strict=True)
        if not self.root.is_dir():
            raise WorkspaceError(f"the workspace root {root} is not a directory")
        self.use_openat2 = openat2.available() if use_openat2 is None else use_openat2

    # -- the policy's advisory view ----------------------------------------------------------------------
    def resolve(self, target: str, *, must_exist: bool = False) -> Path:
        """The lexical path of ``target`` inside the workspace (for messages and relative names; never opened
        by callers — use the methods below); raises WorkspaceError for bad syntax or a symlink on the way."""
        parts = self.parts(target)
        if self._symlink_on_way(parts):
            raise WorkspaceError(f"{target!r} passes through a symlink; symlinks are not followed in the workspace")
        path = self.root.joinpath(*parts)
        if must_exist and not self._exists(path):
            raise WorkspaceError(f"{target!r} does not exist in the workspace")
        return path

    def status(self, target: str) -> str:
        """INSIDE, OUTSIDE (through a symlink) or INVALID (absolute, ``..``, NUL, empty, too long). Never raises."""
        try:
            parts = self.parts(target)
        except WorkspaceError:
            return INVALID
        return OUTSIDE if self._symlink_on_way(parts) else INSIDE

    def kind(self, target: str) -> str:
        """'file', 'directory', 'missing', 'other', or OUTSIDE / INVALID; never raises."""
        where = self.status(target)
        if where != INSIDE:
            return where
        try:
            mode = os.lstat(self.root.joinpath(*self.parts(target))).st_mode
        except OSError:
            return "missing"
        return "file" if stat.S_ISREG(mode) else "directory" if stat.S_ISDIR(mode) else "other"

    def relative(self, path: Path) -> str:
        """``path`` as written relative to the workspace root."""
        return path.relative_to(self.root).as_posix() or "."

    def parts(self, target: str) -> tuple[str, ...]:
        """The path components of ``target``, refused (WorkspaceError) if any could lead outside."""
        problem = _syntax_problem(target)
        if problem:
            raise WorkspaceError(f"{_shown(target)}: {problem}")
        return tuple(p for p in PurePosixPath(target.replace("\\", "/")).parts if p != ".")

    def _symlink_on_way(self, parts: tuple[str, ...]) -> bool:
        path = self.root
        for part in parts:
            path = path / part
            try:
                if stat.S_ISLNK(os.lstat(path).st_mode):
                    return True
            except OSError:
                return False
        return False

    @staticmethod
    def _exists(path: Path) -> bool:
        try:
            os.lstat(path)
        except OSError:
            return False
        return True

    # -- enforced operations ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def directory(self, target: str = ".", *, create: bool = False) -> Iterator[int]:
        """An fd of a directory inside the workspace (created with its parents if ``create``)."""
        parts = self.parts(target) if target not in ("", ".") else ()
        fd = self._walk(parts, create=create)
        try:
            yield fd
        finally:
            os.close(fd)

    def read_bytes(self, target: str, limit: int) -> bytes:
        """At most ``limit`` bytes of a regular file; larger files are refused."""
        return _read_checked(self._open_file(target, _READ), target, limit)

    @staticmethod
    def read_entry(dir_fd: int, name: str, relative: str, limit: int) -> bytes:
        """The same checked read for an entry ``files`` yielded (its directory fd and name), without a symlink."""
        return _read_checked(_guard(relative, lambda: os.open(name, _READ, dir_fd=dir_fd)), relative, limit)

    def write_bytes(self, target: str, data: bytes) -> None:
        """Create or replace a regular file's content; the parent directories are created as needed."""
        *parents, leaf = self.parts(target) or ("",)
        if not leaf:
            raise WorkspaceError(f"{_shown(target)}: not a file name")
        dir_fd = self._walk(tuple(parents), create=True)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = _guard(target, lambda: os.open(leaf, flags, 0o644, dir_fd=dir_fd))
        finally:
            os.close(dir_fd)
        try:
            self._check_file(fd, target)
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def unlink(self, target: str) -> None:
        """Delete the file ``target`` inside the workspace (a directory or a path outside is refused)."""
        *parents, leaf = self.parts(target) or ("",)
        if not leaf:
            raise WorkspaceError(f"{_shown(target)}: not a file name")
        dir_fd = self._walk(tuple(parents), create=False)
        try:
            info = _guard(target, lambda: os.stat(leaf, dir_fd=dir_fd, follow_symlinks=False))
            if stat.S_ISDIR(info.st_mode):
                raise WorkspaceError(f"{_shown(target)} is a directory; only files are deleted")
            if stat.S_ISLNK(info.st_mode):
                raise WorkspaceError(f"{_shown(target)} is a symlink; symlinks are not touched in the workspace")
            if stat.S_ISREG(info.st_mode):
                _refuse_hard_links(info, target)
            _guard(target, lambda: os.unlink(leaf, dir_fd=dir_fd))
        finally:
            os.close(dir_fd)

    def files(self, under: str = ".", *, skip_hidden: bool = False) -> Iterator[tuple[str, int, str]]:
        """(relative path, directory fd, name) of every regular file below ``under``, sorted, symlinks never
        followed (``os.fwalk`` opens each directory relative to its parent's fd). The fd is valid only until the
        next item."""
        base = self.parts(under) if under not in ("", ".") else ()
        with self.directory(under) as top:
            for directory, subdirs, names, dir_fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
                subdirs[:] = sorted(d for d in subdirs if d != ".git" and not (skip_hidden and d.startswith(".")))
                prefix = PurePosixPath(*base, *PurePosixPath(directory).parts[1:])
                for name in sorted(names):
                    if skip_hidden and name.startswith("."):
                        continue
                    try:
                        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISREG(info.st_mode):
                        yield (prefix / name).as_posix(), dir_fd, name

    # -- internals --------------------------------------------------------------------------------------
    def _open_file(self, target: str, flags: int) -> int:
        parts = self.parts(target)
        if not parts:
            raise WorkspaceError(f"{_shown(target)} is the workspace itself, not a file")
        if self.use_openat2:
            return self._beneath("/".join(parts), flags, target)
        dir_fd = self._walk(parts[:-1], create=False)
        try:
            return _guard(target, lambda: os.open(parts[-1], flags, dir_fd=dir_fd))
        finally:
            os.close(dir_fd)

    def _beneath(self, path: str, flags: int, target: str) -> int:
        root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            return _guard(target, lambda: openat2.open_beneath(root, path, flags))
        finally:
            os.close(root)

    def _walk(self, parts: tuple[str, ...], *, create: bool) -> int:
        """An fd of the directory at ``parts``, opened one component at a time with O_NOFOLLOW."""
        target = "/".join(parts) or "."
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        if self.use_openat2 and not create:
            return self._beneath(target, flags, target)
        fd = os.open(self.root, flags)
        try:
            for part in parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        _guard(target, functools.partial(os.mkdir, part, 0o755, dir_fd=fd))
                following = _guard(target, functools.partial(os.open, part, flags, dir_fd=fd))
                os.close(fd)
                fd = following
        except BaseException:
            os.close(fd)
            raise
        return fd

    @staticmethod
    def _check_file(fd: int, target: str) -> os.stat_result:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise WorkspaceError(f"{_shown(target)} is {kind}")
        _refuse_hard_links(info, target)
        os.set_blocking(fd, True)
        return info


def _refuse_hard_links(info: os.stat_result, target: str) -> None:
    """A file with a second name may be a file outside the workspace: it is neither read, written nor deleted."""
    if info.st_nlink > 1:
        raise WorkspaceError(f"{_shown(target)} has {info.st_nlink} hard links; such files are not touched")


def _read_checked(fd: int, target: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular, singly linked file open at ``fd`` (closed here); larger is refused."""
    try:
        size = Workspace._check_file(fd, target).st_size
        if size > limit:
            raise WorkspaceError(f"{_shown(target)} has {size} bytes; files over {limit} bytes are not read")
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)[:limit]
    finally:
        os.close(fd)


def _guard(target: str, call: Callable[[], T]) -> T:
    """Run one system call; an OSError becomes a WorkspaceError that says what was wrong with the target."""
    try:
        return call()
    except FileExistsError:
        raise
    except OSError as exc:
        raise WorkspaceError(f"{_shown(target)}: {_explain(exc)}") from None


def _explain(exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.EXDEV):
        return "a symlink on the way (symlinks are not followed in the workspace)"
    if exc.errno == errno.ENOENT:
        return "does not exist in the workspace"
    if exc.errno == errno.ENOTDIR:
        return "a component of the path is not a directory (or is a symlink)"
    if exc.errno == errno.EISDIR:
        return "is a directory"
    if exc.errno == errno.ENAMETOOLONG:
        return "the path is too long"
    return exc.strerror or str(exc)


def _shown(target: str) -> str:
    return repr(target if len(target) <= 120 else target[:117] + "...")


def _syntax_problem(target: str) -> str | None:
    if not target:
        return "an empty path"
    if "\x00" in target:
        return "a NUL byte in the path"
    try:
        encoded = target.encode("utf-8")
    except UnicodeEncodeError:
        return "the path is not valid Unicode (a lone surrogate)"
    if len(encoded) > MAX_PATH_BYTES:
        return f"the path has {len(encoded)} bytes; at most {MAX_PATH_BYTES} are accepted"
    if os.path.isabs(target) or target.startswith(("/", "\\", "~")) or (len(target) > 1 and target[1] == ":"):
        return "absolute paths are not allowed; give a path relative to the workspace"
    parts = PurePosixPath(target.replace("\\", "/")).parts
    if ".." in parts:
        return "'..' is not allowed in workspace paths"
    if any(len(p.encode("utf-8")) > MAX_NAME_BYTES for p in parts):
        return f"a path component is longer than {MAX_NAME_BYTES} bytes"
    return None
