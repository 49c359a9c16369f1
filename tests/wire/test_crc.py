"""SIGIL's CRC-32C is the ``crc32c`` package's C function, loaded without the package's ``__init__`` (whose
version lookup costs the CLI's start 30 ms): the same checksum for any bytes, and the package itself not imported."""

from __future__ import annotations

import json
import subprocess
import sys

import crc32c as package
from hypothesis import given
from hypothesis import strategies as st

from groundstate.wire._frameloop import crc as compiled_crc
from groundstate.wire.crc import crc32c


@given(st.binary(max_size=4096))
def test_the_checksum_is_the_packages(data: bytes) -> None:
    assert crc32c(data) == package.crc32c(data)


def test_known_vector() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value (RFC 3720, appendix B.4)


def test_loading_it_does_not_run_the_packages_init() -> None:
    probe = "import sys, json, groundstate.wire.crc\nprint(json.dumps(sorted(m for m in sys.modules if 'crc32c' in m)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == ["crc32c._crc32c"]


@given(st.binary(max_size=4096), st.integers(0, 7))
def test_the_compiled_loops_checksum_is_the_same_by_instruction_and_by_table(data: bytes, offset: int) -> None:
    """The frame loop checks frames with SSE 4.2's crc32 instruction where the processor has it (eight bytes a step),
    else the table: both, at any alignment, are the checksum the encoder wrote."""
    view = memoryview(b"\0" * offset + data)[offset:]
    assert compiled_crc(view) == compiled_crc(view, True) == crc32c(data)
