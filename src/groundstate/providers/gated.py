"""The gateway with the packet gate (``groundstate gateway --gate``): every reply must be a Piggyback envelope whose
control packet validates before its surface response is passed on — the client receives the surface text only, as
ordinary chat-completion chunks, and never a word of a reply that breaks the protocol.

A reply the gate aborts (no control packet first, a packet that does not validate, an envelope cut short) ends the
stream with an in-band error chunk (``{"error": {"type": "policy_violation", "code": "packet_gate", ...}}``), which
the OpenAI SDKs raise as their API error; a non-streamed reply is answered with a 502 carrying the same error. The
gate itself (``packets.PacketGate`` with the kernel's update checks) is handed in by the command line, so this
module depends on no package above the providers.

Only the OpenAI Chat Completions API is gated (its stream's text is what the gate reads); the command refuses
``--gate`` with another API.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any, Protocol

from .. import safejson
from ..errors import GroundstateError, UpstreamFailed
from .errors import CUT_OFF
from .normalized import Finish, TextDelta
from .openai_chat import OpenAIChatAdapter
from .openai_wire import ReplyCutOff, ReplyRefused, Send, problem_body, send_error, send_json

GATED_APIS = ("openai-chat",)
_MODEL_NAME = re.compile(r"[^A-Za-z0-9._:/@+-]")


class Verdict(Protocol):
    """What the gate decided about a whole reply."""

    decision: str
    reason: str | None


class OutputGate(Protocol):
    """A streaming gate: text in, the text that may be shown now out; ``close`` decides."""

    def feed(self, text: str) -> list[str]:
        """The surface text this piece releases."""
        ...

    def close(self) -> Verdict:
        """The decision on the whole reply."""
        ...


GateFactory = Callable[[], OutputGate]


def refusal(reason: str | None, cut_off: bool = False) -> ReplyRefused:
    """The error a client gets for a reply the gate refused; a reply the upstream ended at its output-token limit
    (``cut_off``) says so, in the words every other path uses, instead of the broken envelope that followed."""
    if cut_off:
        return ReplyCutOff(f"the model's reply {CUT_OFF}")
    return ReplyRefused(f"the model's reply broke the control-packet protocol and was cut: {reason}")


class GatedStream:
    """One streamed reply through the gate: upstream SSE bytes in, gated chat-completion chunks out."""

    def __init__(self, gate: OutputGate, model: str, send: Send) -> None:
        self.gate, self.send = gate, send
        self.adapter = OpenAIChatAdapter("openai")
        self.base = {"id": f"chatcmpl-gated-{time.time_ns()}", "object": "chat.completion.chunk",
                     "created": int(time.time()), "model": model}  # fmt: skip
        self.events: list[Any] = []  # every normalised event, for the caller's metrics and subscribers
        self.cut_off = False  # the upstream said it stopped at the output-token limit

    async def start(self) -> None:
        """The response head and the role chunk."""
        await self.send({"type": "http.response.start", "status": 200,
                         "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
        await self._chunk({"role": "assistant", "content": ""}, None)

    async def feed(self, data: bytes) -> list[Any]:
        """Upstream bytes: the surface text they release is sent on; their events are returned."""
        events = self.adapter.feed(data)
        await self._pass(events)
        return events

    async def close(self) -> list[Any]:
        """The end of the upstream stream: the finish, or the gate's refusal in band; then ``[DONE]``."""
        events = self.adapter.close()
        await self._pass(events)
        verdict = self.gate.close()
        if verdict.decision == "accepted":
            await self._chunk({}, "stop")
        else:
            await self._write(problem_body(refusal(verdict.reason, self.cut_off))[1])
        await self.send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        return events

    def broke_off(self, error: GroundstateError) -> bytes:
        """The bytes that end the stream when the upstream broke off after it began: ``error`` as an in-band error
        chunk (as a refusal is), then ``[DONE]`` — the client's SDK raises it; never a clean end after part of an
        answer."""
        return b"data: " + json.dumps(problem_body(error)[1]).encode() + b"\n\ndata: [DONE]\n\n"

    async def _pass(self, events: list[Any]) -> None:
        for event in events:
            self.cut_off = self.cut_off or (isinstance(event, Finish) and event.reason == "length")
            if isinstance(event, TextDelta) and event.choice == 0:  # one answer is judged: other choices never pass
                for piece in self.gate.feed(event.text):
                    await self._chunk({"content": piece}, None)

    async def _chunk(self, delta: dict[str, Any], finish: str | None) -> None:
        await self._write({**self.base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    async def _write(self, payload: dict[str, Any]) -> None:
        await self.send({"type": "http.response.body", "body": b"data: " + json.dumps(payload).encode() + b"\n\n",
                         "more_body": True})  # fmt: skip


async def send_gated_whole(gate: OutputGate, data: bytes, send: Send) -> None:
    """A non-streamed reply through the gate: a reply built anew from the released surface text alone, or a 502
    with the refusal. Nothing else of the upstream's reply is passed on — not its native ``tool_calls`` or
    ``function_call``, not further choices, not a ``refusal`` field — for none of it went through the gate: the
    client receives exactly what was judged."""
    try:
        reply = safejson.loads(data)
        choice = reply["choices"][0]
        text = choice["message"].get("content") or ""
        cut_off = choice.get("finish_reason") == "length"
        if not isinstance(text, str):
            raise TypeError("the message content is not text")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        await send_error(send, UpstreamFailed("the upstream's reply is not a chat completion"))
        return
    released = "".join(gate.feed(text))
    verdict = gate.close()
    if verdict.decision != "accepted":
        await send_error(send, refusal(verdict.reason, cut_off))
        return
    built: dict[str, Any] = {
        "id": f"chatcmpl-gated-{time.time_ns()}", "object": "chat.completion",  # ours: the upstream's is unjudged
        "created": reply["created"] if isinstance(reply.get("created"), int) else int(time.time()),
        "model": _MODEL_NAME.sub("", str(reply.get("model") or ""))[:100],  # a name, one line of plain characters
        "choices": [{"index": 0, "message": {"role": "assistant", "content": released}, "finish_reason": "stop"}],
    }  # fmt: skip
    if isinstance(reply.get("usage"), dict):
        built["usage"] = {k: v for k, v in reply["usage"].items() if isinstance(v, int) and not isinstance(v, bool)}
    await send_json(send, 200, built)
