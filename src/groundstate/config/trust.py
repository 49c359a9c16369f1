"""Which implicitly found configuration files the operator has said to trust.

A ``groundstate.toml`` lying in the working directory belongs to whoever wrote the directory — a cloned repository,
a downloaded archive — not necessarily to the operator running the command. Used blindly it would import that
author's Python modules (``[tools] modules``), switch guards off or send every pause to their webhook. So a file
found that way is only *data* until the operator trusts it: ``groundstate config trust`` records the file's absolute
path with the SHA-256 of its bytes in ``$GROUNDSTATE_HOME/trusted-configs.json`` (0600). A changed file (a ``git
pull``) no longer matches and is ignored again until trusted anew. Files named explicitly (``--config``,
``GROUNDSTATE_CONFIG``) are the operator's own choice and need no record.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .. import safejson
from ..errors import ConfigurationError
from .home import home

TRUST_FILE = "trusted-configs.json"


def digest_of(data: bytes) -> str:
    """``sha256:…`` of a file's bytes: what a trust record is bound to."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _key(path: Path) -> str:
    """The path a record names: absolute, with its symbolic links *not* followed — the configuration's own directory
    is where its relative paths and its tool modules are found, so a link in another directory to a trusted file is
    another, untrusted, configuration."""
    return os.path.normpath(os.path.abspath(path))


def is_trusted(path: Path, data: bytes) -> bool:
    """Whether ``data`` (the bytes about to be used, read once) are the ones the operator trusted at ``path``."""
    return _records().get(_key(path)) == digest_of(data)


def trust(path: Path) -> str:
    """Record ``path`` (as it is now) as trusted; returns the digest recorded."""
    if not path.is_file():
        raise ConfigurationError(f"{path}: no such configuration file to trust")
    records = _records()
    digest = records[_key(path)] = digest_of(path.read_bytes())
    _write(records)
    return digest


def untrust(path: Path) -> bool:
    """Forget ``path``'s trust record; False when there was none."""
    records = _records()
    if records.pop(_key(path), None) is None:
        return False
    _write(records)
    return True


def _records() -> dict[str, str]:
    file = home() / TRUST_FILE
    try:
        loaded = safejson.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{file}: unreadable trust records ({exc}); remove it and trust again") from None
    if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
        raise ConfigurationError(f"{file}: trust records must be an object of path → digest; remove it")
    return {str(k): v for k, v in loaded.items()}


def _write(records: dict[str, str]) -> None:
    """Written whole to a private temporary file, then renamed over the old one (a reader never sees half)."""
    file = home() / TRUST_FILE
    temporary = file.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(records, handle, indent=1, sort_keys=True)
    os.replace(temporary, file)
