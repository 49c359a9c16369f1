"""``openat2(2)`` through ctypes: open a path beneath a directory fd with no symlink at any component.

``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` makes the kernel itself refuse any ``..`` escape and any symlink on the
way, atomically — no window between a check and the open. Linux 5.6+; ``available()`` says whether this kernel
and libc have it (elsewhere the caller walks component by component with ``O_NOFOLLOW``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import platform
import sys

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_SYSCALL = {"x86_64": 437, "aarch64": 437, "arm64": 437, "riscv64": 437, "ppc64le": 437, "s390x": 437}


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux") or platform.machine() not in _SYSCALL:
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def open_beneath(dir_fd: int, path: str, flags: int, mode: int = 0) -> int:
    """An fd for ``path`` beneath ``dir_fd``; OSError (ELOOP for a symlink, EXDEV for an escape) otherwise."""
    libc = _libc()
    if libc is None:
        raise OSError(errno.ENOSYS, "openat2 is not available")
    how = _OpenHow(flags | os.O_CLOEXEC, mode, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    fd = int(libc.syscall(_SYSCALL[platform.machine()], dir_fd, os.fsencode(path), ctypes.byref(how),
                          ctypes.sizeof(how)))  # fmt: skip
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return fd


@functools.cache
def available() -> bool:
    try:
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        os.close(open_beneath(fd, ".", os.O_RDONLY | os.O_DIRECTORY))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
