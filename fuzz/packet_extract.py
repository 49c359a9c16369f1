"""atheris fuzz harness for finding the envelope in model output (plain, fenced, embedded) and for the gateway's
chat-request parser: both take text an attacker writes.

    python fuzz/packet_extract.py WORKDIR fuzz/packet-corpus -atheris_runs=1000000

Fails on any exception other than the typed ChatRequestError, and if the linear fence scan disagrees with the
regex it replaced on short inputs.
"""

from __future__ import annotations

import contextlib
import re
import sys

import atheris

with atheris.instrument_imports():
    from groundstate.packets.extract import fenced_blocks, find_envelope
    from groundstate.providers.chat_request import ChatRequestError, parse_chat_request

_OLD_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.DOTALL)


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    find_envelope(text)
    if len(text) < 2000:
        expected = [(m.start(), m.end(), m.group(1)) for m in _OLD_FENCE.finditer(text)]
        if fenced_blocks(text) != expected:
            raise AssertionError("the fence scan disagrees with the regex it replaced")
    with contextlib.suppress(ChatRequestError):
        parse_chat_request(data)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
