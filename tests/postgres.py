"""A real PostgreSQL server, started in a temporary directory: a fixture for the test modules that need one, and a
context manager for the benchmarks."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

BINARIES = [Path("/usr/local/bin"), *sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)]


def _binary(name: str) -> str | None:
    return next((str(d / name) for d in BINARIES if (d / name).exists()), shutil.which(name))


def installed() -> bool:
    """Whether PostgreSQL's server binaries (initdb, pg_ctl) are on this machine."""
    return _binary("initdb") is not None and _binary("pg_ctl") is not None


@contextlib.contextmanager
def running_postgres() -> Iterator[str]:
    """A fresh server on a free loopback port until the block ends; yields its SQLAlchemy URL."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise RuntimeError("PostgreSQL (initdb, pg_ctl) is not installed: apt-get install postgresql")
    folder = Path(tempfile.mkdtemp(prefix="groundstate-pg-"))  # under /tmp: pytest's folders are root-only
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    as_user = ["su", "postgres", "-s", "/bin/sh", "-c"] if os.geteuid() == 0 else ["/bin/sh", "-c"]
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    data = folder / "data"
    subprocess.run([*as_user, f"{initdb} -D {data} -A trust -U postgres"], check=True, capture_output=True)
    start = f"{pg_ctl} -D {data} -w -o '-p {port} -k {folder} -c listen_addresses=127.0.0.1' -l {folder}/log start"
    subprocess.run([*as_user, start], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, f"{pg_ctl} -D {data} -m immediate stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    if not installed():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL (initdb, pg_ctl) is needed for the Postgres store tests")
        pytest.skip("PostgreSQL is not installed")
    with running_postgres() as url:
        yield url
