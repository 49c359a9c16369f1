"""CRC-32C (Castagnoli), the checksum of every SIGIL frame: the ``crc32c`` package's C function.

The function is loaded from the package's extension module directly: the package's ``__init__`` also reads its own
version through ``importlib.metadata``, which costs about 30 ms — a sixth of a short ``groundstate sigil`` command
(bench/cli). If the extension cannot be found that way (another layout of the package), the ordinary import is
used: the same function, only slower to load.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

EXTENSION = "crc32c._crc32c"


def _extension() -> ModuleType | None:
    package = importlib.util.find_spec("crc32c")  # finds the package without running its __init__
    for location in (package.submodule_search_locations or []) if package is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(location) / f"_crc32c{suffix}"
            spec = importlib.util.spec_from_file_location(EXTENSION, path) if path.exists() else None
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules.setdefault(EXTENSION, module)
                return module
    return None


def _crc32c() -> Callable[[bytes], int]:
    loaded = sys.modules.get(EXTENSION) or _extension()
    if loaded is not None:
        function: Callable[[bytes], int] = loaded.crc32c
        return function
    from crc32c import crc32c as imported

    return imported


crc32c = _crc32c()
