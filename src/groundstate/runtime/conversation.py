"""One agent's conversation with the model, one round at a time: the answer streamed from the first model that
sends anything (the fallbacks before it), through the packet gate, into the run's recording, counted and priced.

What a round leaves is a ``Conclusion`` (the attempt's answer so far, its tags, cost and error) and the accepted
gate result; what the agent then does with the packet — its tool rounds, its pause — is the attempt's business
(``runner.py``). Nothing here writes an event: a round's only effects are the recording's bytes and the metrics.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from .. import tracing
from ..config import Price
from ..kernel import Shards
from ..packets import ACCEPTED, GateResult, MemoryOperation, PacketGate, UpdateValidator
from ..providers import MAX_TOKEN_COUNT, ErrorEvent, ErrorRecord, ProviderMetrics, SigilBridge, TextDelta, ThinkDelta
from ..wire import Mode
from .backends import Backend, Piece, Signals
from .recordings import RunRecording
from .workflow import AgentSpec

MAX_THINKING_CHARS = 1_000_000  # of an attempt's reasoning kept in its events (the rest is counted)
MAX_WARNINGS = 64  # of an attempt's packets' warnings kept in its event (60,000 dropped items made 14 MB of them)


@dataclass
class Conclusion:
    """How one attempt of an agent ended: its answer and tags, what ran, its error or pause, what it cost."""

    surface: str = ""
    status_tag: str = "missing"
    bypass: str | None = None
    executed: list[str] = field(default_factory=list)
    error: str | None = None
    error_kind: str = "failure"  # what kind of hard error (the guards' error_kind: transport, timeout, cut_off, ...)
    paused: bool = False
    thinking: str = ""  # reasoning (streamed, and the packets' traces): shown collapsed, never as the answer
    thinking_dropped: int = 0  # characters of reasoning past MAX_THINKING_CHARS, counted, not kept
    signals: Signals = field(default_factory=Signals)
    input_tokens: int = 0
    output_tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    cost: float = 0.0  # by the run's price table
    model: str | None = None  # the backend that answered the last round
    memory: list[MemoryOperation] = field(default_factory=list)  # the accepted packets' memory operations
    archived: int = 0  # actions retention moved to cold storage during the attempt
    fallbacks: list[dict[str, str]] = field(default_factory=list)  # models that failed before their first token
    warnings: list[str] = field(default_factory=list)  # the packets' (an item dropped, a section missing): at most
    warnings_dropped: int = 0  # MAX_WARNINGS kept; those past it counted, not kept

    def think(self, text: str) -> None:
        """Reasoning the model sent, kept up to ``MAX_THINKING_CHARS`` and counted past it: the gate's bound is on
        the answer's text alone, and 150 MB of reasoning beside a small answer made one event of 157 MB (found by an
        attack)."""
        room = MAX_THINKING_CHARS - len(self.thinking)
        if room > 0:
            self.thinking += text[:room]
        self.thinking_dropped += max(0, len(text) - max(room, 0))

    def warn(self, said: list[str]) -> None:
        """Warnings of a packet, kept up to ``MAX_WARNINGS`` and counted past it — a later round's too (once full, a
        later round's were left out uncounted: found by an attack, which filled the first round with junk to hide
        what the second dropped)."""
        room = max(MAX_WARNINGS - len(self.warnings), 0)
        self.warnings += said[:room]
        self.warnings_dropped += max(len(said) - room, 0)

    def shown_warnings(self) -> list[str]:
        """The warnings an event keeps: at most ``MAX_WARNINGS``, the last then counting the rest."""
        if not self.warnings_dropped:
            return self.warnings
        return [*self.warnings[: MAX_WARNINGS - 1], f"... and {self.warnings_dropped + 1} more warnings"]

    def reasoning(self) -> str:
        """The reasoning kept, and how much more there was."""
        if not self.thinking_dropped:
            return self.thinking
        return f"{self.thinking}\n[... {self.thinking_dropped} more characters of reasoning, not kept]"

    def usage(self) -> dict[str, float]:
        """What the attempt cost so far: tokens in and out (as providers counted them) and seconds."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "seconds": round(time.monotonic() - self.started, 3), "cost": round(self.cost, 6)}  # fmt: skip


@dataclass
class OneAnswer:
    """One model's answer in a round of a conversation: the model asked, where its text goes (the packet gate, the
    attempt's conclusion), where its pieces are recorded, how long it may take and what its tokens cost."""

    backend: Backend
    conversation: Conversation
    gate: PacketGate
    conclusion: Conclusion
    recorder: RunRecording
    bridge: SigilBridge
    seconds: float
    price: Price | None


@dataclass
class Conversation:
    """One agent's conversation with the model: its messages, the text of the round being streamed, its kernel."""

    spec: AgentSpec
    validator: UpdateValidator
    schema: dict[str, Any]
    messages: list[dict[str, str]]
    raw: list[str] = field(default_factory=list)
    shards: Shards | None = None
    temperature: float | None = None  # the agent's shard profile's, when configured
    journal_scope: str = ""  # where the tool journal records this conversation's calls (run, agent, epoch)
    remembered: list[tuple[str, str]] = field(default_factory=list)  # the memory entries its prompt holds


class ModelRounds:
    """Streams the rounds of a run's conversations: where they are recorded, what each model's tokens cost, and the
    metrics their calls go to (``stream_aborts``: the kernel's, for an answer the gate refused; ``providers``: the
    runtime's per-model calls, tokens and failures)."""

    def __init__(
        self, recording: RunRecording, prices: dict[str, Price], stream_aborts: Counter, providers: ProviderMetrics
    ) -> None:
        self.recording, self.prices = recording, prices
        self.stream_aborts, self.providers = stream_aborts, providers

    async def stream_round(
        self,
        backends: list[Backend],
        conversation: Conversation,
        round_of: tuple[int, int],
        conclusion: Conclusion,
        seconds: float,
    ) -> GateResult | None:
        """Stream one answer through the packet gate into a recording. A model that fails before it sent anything
        (refused the connection, an HTTP error, no first token within ``seconds``) hands the round to the next
        fallback model; once a model has sent something, its failure is the agent's hard error — never a silent
        switch mid-answer. None when the agent failed (the reason in ``conclusion.error``); otherwise the accepted
        gate result, its surface and reasoning kept in ``conclusion``."""
        gate = PacketGate(conversation.validator)
        recording, (attempt, round_number) = self.recording, round_of
        for backend in backends:
            stream = recording.stream(conversation.spec.id, attempt, round_number, backend.name)  # each model its own
            bridge = SigilBridge(backend.vocabulary, stream_id=stream)
            one = OneAnswer(backend, conversation, gate, conclusion, recording, bridge, seconds,
                            self.prices.get(backend.name))  # fmt: skip
            error, answered = await self._stream_from(one)
            recording.write(bridge.end())
            conclusion.model, conclusion.error = backend.name, error
            if error is None or answered:
                break
            conclusion.fallbacks.append({"model": backend.name, "error": error})
        if conclusion.error is not None:  # what the gate had read and dropped before the error is said too
            conclusion.warn(_dropped_by(gate))
            return None
        gated = gate.close()
        conclusion.warn(_dropped_by(gate))
        if gated.decision != ACCEPTED or gated.packet is None or gated.packet.packet is None:
            self.stream_aborts.inc()
            conclusion.error = f"the model's output was rejected by the packet gate: {gated.reason}"
            conclusion.error_kind = "packet"
            conclusion.surface = "".join(conversation.raw)[:2000]
            return None
        conclusion.surface = gated.surface
        conclusion.memory.extend(gated.packet.packet.memory_operations)
        if gated.packet.packet.reasoning_trace:
            conclusion.think(gated.packet.packet.reasoning_trace + "\n")
        return gated

    async def _stream_from(self, one: OneAnswer) -> tuple[str | None, bool]:
        """One model's answer, within ``one.seconds`` (the shard profile's ``max_execution_time_sec``: a hung
        provider is a hard error, not a hung run): the error that ended it, if any, and whether it sent anything. Its
        tokens are counted, and priced when the model has a price. A span of its own when tracing is on."""
        if not tracing.enabled():
            return await self._answer_from(one)
        backend, conversation, conclusion = one.backend, one.conversation, one.conclusion
        attributes: dict[str, str | int] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": backend.name,
                                            "gen_ai.agent.name": conversation.spec.id,
                                            "groundstate.prompt_chars": sum(
                                                len(m["content"]) for m in conversation.messages)}  # fmt: skip
        before = (conclusion.input_tokens, conclusion.output_tokens)
        with tracing.span(f"chat {backend.name}", attributes, kind="client") as current:
            error, answered = await self._answer_from(one)
            tracing.note(current, gen_ai__usage__input_tokens=int(conclusion.input_tokens - before[0]),
                         gen_ai__usage__output_tokens=int(conclusion.output_tokens - before[1]),
                         error__type=conclusion.error_kind if error else None)  # fmt: skip
        return error, answered

    async def _answer_from(self, one: OneAnswer) -> tuple[str | None, bool]:
        backend, conversation, conclusion, seconds, price = one.backend, one.conversation, one.conclusion, \
            one.seconds, one.price  # fmt: skip
        error, answered, refused = None, False, False
        try:
            async with asyncio.timeout(seconds):
                options = {} if conversation.temperature is None else {"temperature": conversation.temperature}
                async for piece in backend.stream(conversation.messages, conversation.schema, **options):
                    error = error or piece.error
                    answered = answered or bool(piece.text or piece.tokens or piece.thinking or piece.tool_call
                                                or piece.refusal or piece.finish == "tool_calls")  # an answer too:
                    # no fallback takes over from a model that refused or called a tool (its signals stayed counted)
                    conclusion.signals.take(piece, continuing=refused)
                    refused = refused or bool(piece.refusal)
                    if piece.usage is not None:
                        # a count is at most MAX_TOKEN_COUNT (2^53 - 1), and so is an attempt's total: past it a
                        # JSON reader rounds it, and the event stored a float a token off the rules' count
                        conclusion.input_tokens = min(conclusion.input_tokens + piece.usage[0], MAX_TOKEN_COUNT)
                        conclusion.output_tokens = min(conclusion.output_tokens + piece.usage[1], MAX_TOKEN_COUNT)
                        conclusion.cost += price.cost(*piece.usage) if price is not None else 0.0
                        self.providers.used(backend.name, *piece.usage)
                    conclusion.think(piece.thinking)
                    one.recorder.write(recorded(one.bridge, piece))
                    if piece.text or piece.tokens:
                        conversation.raw.append(piece.text)
                        one.gate.feed(piece.text)
        except TimeoutError:
            self._count_call(backend.name, None, "timeout")
            late = f"the model did not answer within {seconds:g} s (the shard profile's max_execution_time_sec)"
            conclusion.error_kind = "timeout"
            return late, answered
        except Exception as exc:  # a backend crash is a hard error of this agent, not of the runtime
            self._count_call(backend.name, None, "backend")
            conclusion.error_kind = "backend"
            return f"the model backend failed: {type(exc).__name__}: {exc}", answered
        self._count_call(backend.name, error, None)
        if error is not None:
            conclusion.error_kind = error_kind(error)
            return f"the model failed ({error.plane}): {error.message}", answered
        return None, answered

    def _count_call(self, model: str, error: ErrorRecord | None, failure: str | None) -> None:
        """The call in the metrics: its conclusion and, when it failed, its error's plane (or ``failure``)."""
        self.providers.called(model, error is None and failure is None)
        if error is not None or failure is not None:
            self.providers.failed(model, error, failure or "transport")


def error_kind(error: ErrorRecord) -> str:
    """The kind of a provider's error, as the guards rank it: the output-token limit, no connection at all (no
    HTTP status: the request never got an answer), or an error the provider answered with."""
    if error.code in ("max_tokens", "length"):
        return "cut_off"
    if error.status is None and error.evidence.get("exception"):
        return "transport"
    return "provider"


def recorded(bridge: SigilBridge, piece: Piece) -> bytes:
    """The piece in the round's SIGIL recording: text (with the real token ids when the backend has them),
    reasoning in THINK mode, errors as upstream errors; the rest is carried as facts, not as stream content."""
    if piece.error is not None:
        return bridge.push(ErrorEvent(piece.error))
    if piece.tokens:
        return bridge.tokens(Mode.TEXT, piece.tokens)
    if piece.text:
        return bridge.push(TextDelta(piece.text))
    if piece.thinking:
        return bridge.push(ThinkDelta(piece.thinking))
    return b""


def _dropped_by(gate: PacketGate) -> list[str]:
    """The gate's warnings, then each of its packet's ``mangle_updates`` the validation dropped, as a warning naming
    the update (cut at 200 characters) and why — whatever the gate then decided (a second envelope after a valid
    one aborts it; a provider's error may end the round): a run applies none of a model's updates, and one it
    dropped was named nowhere — an agent asserting a fact it may not was invisible in the run's record."""
    dropped = gate.packet.dropped_updates if gate.packet is not None else []
    return [*gate.warnings, *(f"mangle_updates: {update.update[:200]!r} was dropped: {update.reason[:300]}"
                              for update in dropped)]  # fmt: skip
