"""atheris fuzz harness for the control-packet gate, envelope extraction and update validation.

    python fuzz/packet_gate.py fuzz/packet-corpus -atheris_runs=1000000

The first byte picks a chunk size; the rest is decoded as UTF-8 (with replacement) and fed to the gate whole
and in chunks, and to a reference gate that takes every character through the transition table (the gate consumes
runs of characters that change nothing at once). The harness fails on any exception, on a decision or released text
that depends on the chunking or differs from the reference's, on an accepted result without a packet, and on a
parse_output crash.
"""

from __future__ import annotations

import re
import sys
import tempfile

import atheris

with atheris.instrument_imports():
    from groundstate.kernel import Kernel
    from groundstate.packets import ACCEPTED, PacketGate, parse_output
    from groundstate.packets import gate as gate_module

ONE_CHARACTER_AT_A_TIME = {where: re.compile(r"[ \t\r\n]") for where in gate_module._INERT}

with tempfile.TemporaryDirectory() as _empty:
    VALIDATOR = Kernel(_empty).update_validator()


def gate(text: str, step: int) -> tuple[str, str | None, str]:
    packet_gate = PacketGate(VALIDATOR, prefix_bytes=512)
    released = []
    for i in range(0, len(text), step):
        released += packet_gate.feed(text[i : i + step])
    result = packet_gate.close()
    if "".join(released) != result.surface:
        raise AssertionError("released pieces differ from the reported surface")
    if result.decision == ACCEPTED and result.packet is None:
        raise AssertionError("accepted without a validated packet")
    return result.decision, result.reason, result.surface


def by_the_table(text: str) -> tuple[str, str | None, str]:
    """The gate with no run longer than one character: every edge of the transition table taken one at a time."""
    runs = dict(gate_module._INERT)
    gate_module._INERT.update(ONE_CHARACTER_AT_A_TIME)
    try:
        return gate(text, max(len(text), 1))
    finally:
        gate_module._INERT.update(runs)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    text = data[1:].decode("utf-8", "replace")
    whole = gate(text, max(len(text), 1))
    if gate(text, data[0] % 17 + 1) != whole:
        raise AssertionError("the gate's decision depends on the chunking")
    if by_the_table(text) != whole:
        raise AssertionError("the gate's runs decide differently from its table taken one character at a time")
    parse_output(text, VALIDATOR)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
