"""``groundstate mcp serve``: an MCP server in front of the configured upstream MCP servers. It lists their tools
(namespaced per server) and decides every ``tools/call`` with the policy before anything reaches an upstream:
permitted calls are forwarded and their result returned; refused ones (by the policy or an operator) are a tool
result with ``isError`` whose text says the decision, the reasons and who decided, the structured decision (digest,
derivation) in its ``_meta["groundstate/decision"]`` — what the model reads and the agent frameworks pass on, where a
JSON-RPC error would be hidden or crash them; calls that need an operator are held until one approves or
``mcp.approval_timeout_sec`` denies them. JSON-RPC errors are left for protocol errors (an unknown tool, malformed
``_meta``, a message that cannot be read whole, an upstream that broke).

What an attacker controls: the client's requests (names, arguments — a model chose them) and the upstreams' answers.
A name no upstream lists is refused; arguments are facts, never rule text; an upstream's failure is that call's
error, never the guard's crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from .. import long_lived, tools, tracing
from ..config import ProjectConfig, home
from ..errors import AccessError, AuthenticationError, ConfigurationError, GroundstateError, http_problem
from ..provenance import ArgumentsRefused, History, Kept, Seen, Session, reading
from ..providers import SHUTDOWN_GRACE_SEC, McpServerError, UnknownPath, UpstreamRefused, Upstreams, connect
from ..safejson import MAX_DEPTH as MAX_MESSAGE_DEPTH
from ..store import ACT, CallInDoubt, Operators, ToolJournal, hot_transaction, in_store, within
from . import local_tools
from .callers import EXCHANGE_STATE, OPERATOR_STATE, Caller, caller_of
from .fast_calls import FastCalls
from .http_sessions import SessionOwners, TwoSessionIds
from .kept_history import KeptHistory, client_key
from .ledger import APPROVED, DENIED, EXPIRED, HELD, WITHDRAWN, Ledger, RowChanged
from .policy import McpPolicy, Prepared, Verdict, check_arguments
from .sdk_log import one_line_sdk_logs
from .shared_histories import SharedHistories
from .stdio import TOO_DEEP, claimed_stdio

STDIO = "stdio"  # the session key and the client of the guard on stdio
NAMED = "named:"  # a history the operator named (mcp serve --history NAME): its key, with the name
DECISION = "groundstate/decision"  # _meta key of a refused call's result: the structured decision
UNKNOWN_TOOL = -32602  # invalid params: no upstream lists that tool
IDEMPOTENCY_KEY = "groundstate/idempotency_key"
REQUEST = "groundstate/request"  # _meta key: the user's request, as the client declares it (provenance)
MAX_KEY_CHARS = 200
MAX_JOURNALED_RESULT = 65_536  # a result is journaled whole up to this size (as JSON), else only whether it failed
# characters of a call's arguments (with its declared request), or of a result's text, that the event loop reads for
# provenance itself; more goes to a worker thread, so that no session's megabytes stop the others' calls (a few
# milliseconds of words on the loop; a thread's hop costs a tenth of a millisecond, too much for every small call)
ON_LOOP_CHARS = 16_384
SWITCH_INTERVAL_SEC = 0.0005  # how long a busy thread keeps Python's lock from the event loop (_loop_first)
_THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="groundstate-provenance")  # sessions' large texts
_T = TypeVar("_T")


class Approvals:
    """Calls held for an operator: recorded in the ledger, decided there by the console, the API or
    `groundstate approvals`; the guard polls for the decision while its client waits — at most ``patience`` seconds
    (``mcp.hold_wait_sec``: clients give up on a request after a few seconds; the call is then *parked* and the
    client told to ask again) and at most until the call expires (``mcp.approval_timeout_sec``), which denies it."""

    def __init__(self, ledger: Ledger, timeout: float, patience: float | None = None, poll: float = 0.2) -> None:
        self.ledger, self.timeout, self.poll = ledger, timeout, poll
        self.patience = timeout if patience is None else patience

    async def wait(
        self,
        entry_id: int,
        report: Callable[[float], Awaitable[None]] | None = None,
        gone: Callable[[], bool] | None = None,
    ) -> str:
        """How the held call ended: ``approved``, ``denied`` (by an operator), ``expired`` or ``withdrawn`` — or
        ``held`` when the guard's patience ran out before the call's time did. ``report`` hears, about once a second,
        how long the call has been waiting (the client's progress notifications); ``gone`` says whether the client's
        connection closed meanwhile (then the call is withdrawn: nobody waits for it)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        entry = await asyncio.to_thread(self.ledger.get, entry_id)
        left = self.timeout if entry is None or entry.expires_at is None else _seconds_until(entry.expires_at)
        expires, give_up = started + left, started + min(left, self.patience)
        reported = started
        while loop.time() < give_up:
            entry = await asyncio.to_thread(self.ledger.get, entry_id)
            if entry is not None and entry.status != HELD:
                return entry.status
            if gone is not None and gone():
                await asyncio.to_thread(self.ledger.withdraw, entry_id, "its client's connection closed")
                entry = await asyncio.to_thread(self.ledger.get, entry_id)  # decided at the very last moment?
                return entry.status if entry is not None else WITHDRAWN
            if report is not None and loop.time() - reported >= 1.0:
                reported = loop.time()
                await report(reported - started)
            await asyncio.sleep(self.poll)
        if loop.time() < expires:
            return HELD
        await asyncio.to_thread(self.ledger.expire, entry_id)
        entry = await asyncio.to_thread(self.ledger.get, entry_id)  # decided at the very last moment?
        return entry.status if entry is not None else EXPIRED


def _seconds_until(moment: datetime) -> float:
    return (moment - datetime.now(UTC)).total_seconds()


@dataclass(frozen=True)
class _Call:
    """One tools/call as the guard handles it: where it goes, with what, and the client's idempotency key."""

    server: str
    tool: str
    arguments: dict[str, Any]
    key: str | None
    client: str  # who calls (see callers.client_name)
    session: Session  # the client session's history (provenance)
    prepared: Prepared  # its facts, the provenance facts of its session's history among them
    account: str | None = None  # the operator account whose token made the call (HTTP): it may not approve it
    kept: str | None = None  # where the store keeps its history for the next guard (stdio: the client process's,
    # or the one the operator named; HTTP: the account's), if it does

    @property
    def scope(self) -> str:
        """Where the journal keeps this server's calls."""
        return f"mcp:{self.server}/"

    @property
    def named(self) -> str:
        """The journal's name for the tool."""
        return f"{self.server}/{self.tool}"

    def where(self, entry: int) -> tuple[str, int]:
        """The journal's (scope, position): the client's key names the call across restarts, else the ledger row. A
        key sent over HTTP is its operator account's (found by an attack: keys were the server's alone, so another
        account that used a key first refused the call it named, and one that sent the same call got its recorded
        result); over stdio the store's, so that a client restarted as another process finds its key."""
        if not self.key:
            return self.scope, entry
        account = f"account:{self.account}/" if self.account is not None else ""
        return f"{self.scope}{account}key:{self.key}", 0


@dataclass
class _Admitted:
    """What admission decided: the verdict, its ledger row, whether it was in doubt, a permit's journal answer."""

    verdict: Verdict
    entry: int
    in_doubt: bool
    recorded: dict[str, Any] | CallInDoubt | None = None
    joined: bool = False  # a held call asked about again (its identical call was parked): not a new hold


class Guard:
    """The guard's two handlers over connected upstreams, a policy and the approvals waiting."""

    def __init__(
        self,
        upstreams: Upstreams,
        policy: McpPolicy,
        ledger: Ledger,
        approvals: Approvals,
        journal: ToolJournal,
        client: str = "stdio",
        *,
        history: History | None = None,
        labels: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        departures: Departures | None = None,
        kept: KeptHistory | None = None,
        named: str | None = None,
    ) -> None:
        """``kept``: where the store keeps what clients were told for the next guard (kept_history.py): over stdio
        the client process's session, resumed from there now — or the history ``named`` by the operator (``mcp
        serve --history NAME``), shared with every guard started with that name; over HTTP each account's history.
        A shared history is caught up before each of its calls (shared_histories.py)."""
        self.upstreams, self.policy, self.ledger, self.approvals = upstreams, policy, ledger, approvals
        self.journal = journal  # every forwarded call: intent before, result after
        self._deciding = threading.Lock()  # the policy's kernel decides one call at a time
        self._sessions_away: Counter[int] = Counter()  # id(session): its history's work in worker threads now
        self.client = client  # the transport: stdio, or http (where each request names its operator account)
        self.history = history or History()  # per client session: what it was told, for provenance
        self.departures = departures  # over HTTP: requests whose client's connection closed
        self._journaling: set[asyncio.Task[None]] = set()  # results being journaled after their answers went out
        self._named = None if named is None else f"{NAMED}{named}"  # every stdio call's history, if named
        # the client process that started this guard (stdio, unless the history is named), if it can be told
        self._kept_key = client_key() if client == STDIO and named is None else None
        self.kept = kept if client != STDIO or self._kept_key is not None or named is not None else None
        shared = client != STDIO or named is not None  # other guards may write it while this one runs
        self.shared = SharedHistories(kept) if kept is not None and shared else None
        if self.kept is not None and self._kept_key is not None:
            parts, unseen = self.kept.load(self._kept_key)
            resumed = self.history.resume(STDIO, parts)
            resumed.overflowed = resumed.overflowed or unseen  # something the client read is not there
        for server, listed in upstreams.tools.items():
            policy.add_tools(server, listed, (labels or {}).get(server, {}))

    async def list_tools(self, _ctx: Any, _params: Any) -> types.ListToolsResult:
        """Every upstream tool, namespaced ``SERVER__TOOL``."""
        return types.ListToolsResult(tools=self.upstreams.exposed())

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        """The SDK's handler: the call's sender read from its request context, then ``answer``."""
        return await self.answer(caller_of(ctx, self.client, self.departures), params)

    async def answer(self, caller: Caller, params: types.CallToolRequestParams) -> types.CallToolResult:
        """Decide, then forward, hold or refuse — in a span of its own when tracing is on."""
        if not tracing.enabled():
            return await self._call_tool(caller, params)
        attributes = {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
                      "gen_ai.tool.name": params.name[:200]}  # fmt: skip
        with tracing.span(f"tools/call {params.name[:200]}", attributes, kind="server") as current:
            result = await self._call_tool(caller, params)
            decided = (result.meta or {}).get(DECISION) if result.is_error else None
            tracing.note(current, groundstate__decision=decided["decision"] if decided else "permit",
                         groundstate__decided_by=decided["by"] if decided else "the policy",
                         error__type="refused" if decided else None)  # fmt: skip
            return result

    async def _call_tool(self, caller: Caller, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == TOO_DEEP:  # a request the transport could not parse whole (stdio.py)
            method = str((params.arguments or {}).get("method", ""))
            raise MCPError(UNKNOWN_TOOL, f"refused: the {method or 'request'} message cannot be read whole (nested "
                                         f"deeper than {MAX_MESSAGE_DEPTH} levels, a lone surrogate, or a number of "
                                         "a thousand digits)")  # fmt: skip
        route = self.upstreams.route(params.name)
        if route is None:
            raise MCPError(UNKNOWN_TOOL, f"no upstream server lists the tool {params.name!r}")
        arguments = dict(params.arguments or {})
        try:  # judged whole or refused: before anything hashes, journals or decides on them
            flattened = check_arguments(arguments)
        except ArgumentsRefused as exc:
            return refused(f"denied: {exc}", {"decision": "deny", "by": "the guard", "reasons": [str(exc)]})
        caller, session = await self._session_of(caller)
        request = _declared_request(params)
        prepare = partial(self._prepare, session, caller, request, *route, arguments, flattened)
        heavy = len(request) + _arguments_chars(flattened) > ON_LOOP_CHARS
        prepared = await self._in_session(session, heavy, prepare)
        kept = None if self.kept is None else caller.told if caller.told is not None else self._kept_key
        call = _Call(*route, arguments, _idempotency_key(params), caller.client, session, prepared, caller.account,
                     kept)  # fmt: skip
        await self.journaled()  # every earlier result journaled first: a retried key finds its result, not an intent
        admitting = asyncio.to_thread if heavy else partial(in_store, self.ledger.engine)  # megabytes of arguments
        admitted = await admitting(self._admit, call)  # are written to the ledger and the journal off the loop too
        verdict, entry = admitted.verdict, admitted.entry
        if verdict.decision == "approve":
            answer = await self._held(caller, call, admitted)
            if answer is not None:
                return answer
            admitted.recorded = await asyncio.to_thread(self._begin, call, entry)
        if verdict.decision == "deny":
            return refused(f"denied by policy: {'; '.join(verdict.reasons)}", _details(verdict, entry, "the policy"))
        try:
            result, fresh = await self._forward(call, entry, admitted.recorded)
        except _NotForwarded as exc:
            return refused(f"denied: {exc}", _details(verdict, entry, "the guard's journal", "deny", [str(exc)]))
        except MCPError as exc:  # the upstream's error message reaches the model: it is that tool's result too (an
            said = types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)
            record = partial(self._record, session, verdict.call, call.server, call.tool, said, call.prepared.facts)
            seen = await self._in_session(session, False, record)  # attack wrote its instructions into one)
            unkept = await self._keep(call, entry, Kept.of(seen, session.overflowed))
            if unkept:
                return _withheld(verdict, entry, call.named, unkept)
            raise
        record = partial(self._record, session, verdict.call, call.server, call.tool, result, call.prepared.facts)
        seen = await self._in_session(session, _result_chars(result) > ON_LOOP_CHARS, record)  # before the model
        unkept = await self._keep(call, entry, Kept.of(seen, session.overflowed))  # reads it: a value it then sends
        if fresh:  # is tied to this result, by this guard and by the next
            self._settle(call, entry, result)
        return result if not unkept else _withheld(verdict, entry, call.named, unkept)

    async def _session_of(self, caller: Caller) -> tuple[Caller, Session]:
        """The caller (its history the one the operator named, if any) and the history its call is judged against,
        caught up with what other guards kept of it since."""
        if self._named is not None and caller.told is None:
            caller = replace(caller, told=self._named)
        session = self.history.session(caller.history)
        if self.shared is not None and caller.told is not None:
            await self.shared.catch_up(caller.told, session, partial(self._absorb, session), ON_LOOP_CHARS)
        return caller, session

    async def _absorb(self, session: Session, parts: list[Kept]) -> None:
        """Results another guard kept, added to ``session`` — in a worker thread when they are large, as a large
        result of this guard's own is (found by an attack: a mebibyte caught up on the loop stalled every account)."""
        heavy = sum(len(part.text) + len(part.fields) for part in parts) > ON_LOOP_CHARS
        await self._in_session(session, heavy, partial(self.history.absorb, session, parts))

    async def _in_session(self, session: Session, heavy: bool, work: Callable[[], _T]) -> _T:
        """``work``, which takes ``session``'s history lock: on the event loop when it is light and none of the
        session's work is in a worker thread (then nothing holds that lock: only such work takes it off the loop),
        else in a worker thread — the loop never waits for a session's lock, which would stop every session. A
        thread's work counts as away until it ends, even when the call that sent it was cancelled meanwhile."""
        key = id(session)
        if not heavy and not self._sessions_away[key]:
            return work()
        loop = asyncio.get_running_loop()
        self._sessions_away[key] += 1

        def back() -> None:
            self._sessions_away[key] -= 1
            if not self._sessions_away[key]:
                del self._sessions_away[key]

        def ended(_: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed first (the guard stopped): nothing to count
                loop.call_soon_threadsafe(back)

        running = _THREADS.submit(work)
        running.add_done_callback(ended)
        return await asyncio.wrap_future(running)

    def _prepare(self, session: Session, caller: Caller, request: str, server: str, tool: str,
                 arguments: dict[str, Any], flattened: list[tuple[str, Any]]) -> Prepared:  # fmt: skip
        """The client's declared request kept for its conversation — ``session``'s own, or (over HTTP, where
        ``session`` is the account's) the caller's session within it — then the call's facts with its provenance
        (what ``session`` was told, what the conversation asked): the work that grows with the arguments, done
        before the admission (which decides one call at a time, in the store's transaction)."""
        if caller.told is None:
            asked = self.history.declare(session, request)
        else:
            asked = self.history.declare_in(caller.session, request, caller.told)
        provenance = partial(self.history.facts, session, asked=asked)
        return self.policy.prepare(server, tool, arguments, caller.client, provenance, flattened)

    def _record(self, session: Session, call: str, server: str, tool: str, result: types.CallToolResult,
                decided: Sequence[tuple[str, tuple[Any, ...]]]) -> Seen:  # fmt: skip
        """A forwarded call's result kept in its session's history, as the model reads it, with where its arguments
        came from as it was decided (what flows.mg's flow_steered asks of the results a later value came from)."""
        return self.history.record(session, call, server, tool, reading(result), decided=decided)

    async def _held(self, caller: Caller, call: _Call, admitted: _Admitted) -> types.CallToolResult | None:
        """Wait for an operator's decision on a held call: None once approved (the call runs), else what the client
        reads — the denial, the timeout, the withdrawal, or "held: ask again" when the guard's patience ran out."""
        verdict, entry = admitted.verdict, admitted.entry
        try:
            report = None if caller.progress is None else partial(_progress, caller.progress, entry)
            ended = await self.approvals.wait(entry, report, caller.gone)
        except asyncio.CancelledError:  # the client cancelled the call, closed its session, or the guard stops
            if not admitted.joined:  # a parked call stays held: its client was told it may ask again
                self.ledger.withdraw(entry, "its client cancelled the call or went away")  # at once: no await left
            raise
        if ended == HELD:
            await asyncio.to_thread(self.ledger.park, entry)
            return _parked(verdict, entry, self.approvals.timeout)
        decided = await asyncio.to_thread(self.ledger.get, entry)
        operator = decided.operator if decided else None  # read once: the journal and the refusal both name them
        try:
            answered = ended not in (APPROVED, DENIED) or await asyncio.to_thread(self.ledger.answer, entry)
        except RowChanged as exc:  # a decision no operator made through groundstate: refused, never run
            return refused(f"denied: {exc}", _details(verdict, entry, "the guard's ledger", "deny", [str(exc)]))
        if not answered:
            why = f"an identical call already took the operator's decision on call {entry}; send it again to ask anew"
            return refused(f"denied: {why}", _details(verdict, entry, "the guard", "deny", [why]))
        if admitted.in_doubt and ended in (APPROVED, DENIED):  # an operator has seen the call in doubt
            await asyncio.to_thread(self.journal.resolve, call.scope, operator or "operator", ended, call.named,
                                    call.arguments)  # fmt: skip
        if ended == APPROVED:
            return None
        if ended == DENIED:
            why = f"the operator {operator} denied the call" if operator else "an operator denied the call"
            by = f"operator:{operator}" if operator else "an operator"
        elif ended == EXPIRED:
            why, by = f"no operator approved the call within {self.approvals.timeout:g} s", "the timeout"
        else:
            why, by = f"the call was {ended} ({decided.ended if decided else 'no reason recorded'})", "the guard"
        return refused(f"denied: {why}: {verdict.reasons[0]}", _details(verdict, entry, by, "deny"))

    def _admit(self, call: _Call) -> _Admitted:
        """In a worker thread and one transaction of the store (the journal shares the ledger's database): whether an
        identical call is in doubt, the policy's verdict (one decision at a time), its row in the ledger, and — for a
        permitted call — its intent in the journal (or its recorded result). One transaction instead of three: the
        admission's cost was its commits (docs/benchmarks.md, "The MCP guard")."""
        with hot_transaction(self.ledger.engine) as db:
            if call.key is not None and (other := self.journal.taken(*call.where(0), call.named, call.arguments, db)):
                raise MCPError(UNKNOWN_TOOL, f"_meta.{IDEMPOTENCY_KEY} {call.key!r} was used for another call "
                                             f"({other} with other arguments): a key names one call")  # fmt: skip
            in_doubt = self.journal.doubts(call.scope, call.named, call.arguments, db=db)
            with self._deciding, tracing.span("decide", {"gen_ai.tool.name": call.named}) as deciding:
                verdict = self.policy.judge(call.prepared, in_doubt=in_doubt)
                tracing.note(deciding, groundstate__decision=verdict.decision, gen_ai__tool__call__id=verdict.call)
            joined = self.ledger.joined(verdict.digest, call.client, db) if verdict.decision == "approve" else None
            entry = joined or self.ledger.record(call.server, call.tool, call.arguments, call.client, verdict,
                                                 self.approvals.timeout, db=db, account=call.account)  # fmt: skip
            admitted = _Admitted(verdict, entry, in_doubt, joined=joined is not None)
            if verdict.disagrees and verdict.shadow is not None:  # the candidate would decide otherwise: not obeyed
                print(f"groundstate mcp guard: shadow: {call.server}/{call.tool} (entry {entry}) was decided "
                      f"{verdict.decision}; the shadow policy would {verdict.shadow[0]}: {verdict.shadow[1][0]}",
                      file=sys.stderr, flush=True)  # fmt: skip
            if verdict.decision == "permit":
                admitted.recorded = self._begin(call, entry, db)
        return admitted

    def _begin(self, call: _Call, entry: int, db: Any = None) -> dict[str, Any] | CallInDoubt | None:
        """The call's intent in the journal (in ``db``, the admission's transaction, when given): None, or its
        recorded result (an idempotency key seen before), or the doubt about it (that key's call was in flight when
        a guard died)."""
        scope, position = call.where(entry)
        with within(self.ledger.engine, db) as db:
            try:
                recorded = self.journal.begin(scope, position, call.named, call.arguments, db=db)
            except CallInDoubt as exc:
                return exc
            if recorded is None and call.kept is not None and self.kept is not None:
                # its result is on its way: should this guard die before keeping it, the next finds the gap
                self.kept.pending(call.kept, entry, db)
            return recorded

    async def _forward(
        self, call: _Call, entry: int, recorded: dict[str, Any] | CallInDoubt | None
    ) -> tuple[types.CallToolResult, bool]:
        """Forward a permitted call whose intent is journaled; its result, and whether it is fresh (its journal row
        is written by ``_settle``): if the guard dies in between, an identical call later is held for an operator
        instead of being run again unasked. A call whose idempotency key already has a result gets that result back
        (not fresh), and nothing is forwarded."""
        server, tool, arguments, named = call.server, call.tool, call.arguments, call.named
        scope, entry = call.where(entry)
        if isinstance(recorded, CallInDoubt):  # the same key, in flight when a guard died, and nobody decided
            raise _NotForwarded(str(recorded))
        if recorded is not None:
            if "cut" in recorded:
                raise _NotForwarded(f"this call ({named}) already ran; its result was too large to keep")
            return types.CallToolResult.model_validate(recorded), False
        await asyncio.to_thread(self.journal.durable)  # the intent on the disk before the effect (power loss)
        try:
            result: types.CallToolResult = await self.upstreams.sessions[server].call_tool(tool, arguments)
        except (MCPError, UpstreamRefused) as exc:  # the upstream's own protocol error: it answered, so it is settled
            await in_store(self.journal.engine, self.journal.finish, scope, entry, named, arguments,
                           {"ok": False, "error": str(exc)})  # fmt: skip
            if isinstance(exc, UpstreamRefused):
                raise MCPError(exc.code, str(exc)) from None
            raise
        except Exception as exc:  # the upstream died or broke its protocol: this call's error, and it stays in doubt
            raise MCPError(-32603, f"the upstream server {server} failed: {type(exc).__name__}: {exc}") from None
        return result, True

    async def _keep(self, call: _Call, entry: int, part: Kept) -> str:
        """A result the client is about to read, kept for the next guard (stdio: the client's next guard process;
        HTTP: the account's other and later guards) before it reads it: kept afterwards, a guard stopped in between
        (its client's SIGTERM) left the next one blind to it. "" once kept (or when nothing is kept), else why it
        could not be: then the client does not read it (``_withheld``) — another guard running meanwhile would judge
        the account's next call without it (found by an attack: the store locked past its busy timeout while a mail
        came back), and the call's place, left empty, resumes the next guard's session marked."""
        if call.kept is None or self.kept is None:
            return ""
        try:
            await in_store(self.ledger.engine, self.kept.result, call.kept, part, None, entry)
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"[:500]
            print(f"groundstate mcp guard: the result of {call.named} (call {entry}) could not be kept for the "
                  f"next guard, and is withheld from its client: {why}", file=sys.stderr, flush=True)  # fmt: skip
            return why
        return ""

    def _settle(self, call: _Call, entry: int, result: types.CallToolResult) -> None:
        """A fresh result journaled, in a task of its own, which runs once the answer is on its way to the client:
        the answer does not wait ~0.2 ms for a transaction that changes nothing it says. Should the guard die in
        between, the call is left with its intent alone — in doubt, as if it had died during the call, and an
        operator decides. The next admission waits for it (``journaled``), and so does the guard's stop."""
        settling = asyncio.get_running_loop().create_task(self._finish(call, entry, result))
        self._journaling.add(settling)
        settling.add_done_callback(self._journaling.discard)

    async def _finish(self, call: _Call, entry: int, result: types.CallToolResult) -> None:
        try:
            recorded = result.model_dump(mode="json", exclude_none=True)
            if len(json.dumps(recorded)) > MAX_JOURNALED_RESULT:
                recorded = {"is_error": result.is_error,
                            "cut": f"the result was longer than {MAX_JOURNALED_RESULT} bytes"}  # fmt: skip
            await in_store(self.journal.engine, self.journal.finish, *call.where(entry), call.named, call.arguments,
                           recorded)  # fmt: skip
        except Exception as exc:  # the client has its answer: the call stays in doubt, and the operator is told
            print(f"groundstate mcp guard: the result of {call.named} (call {entry}) could not be journaled: "
                  f"{type(exc).__name__}: {exc}; an identical call is held as in doubt", file=sys.stderr,
                  flush=True)  # fmt: skip

    async def journaled(self) -> None:
        """Wait until every result being journaled is (``_finish``)."""
        while self._journaling:
            await asyncio.wait(list(self._journaling))


def _declared_request(params: types.CallToolRequestParams) -> str:
    """The user's request the client declares for its session (``_meta["groundstate/request"]``, text): the
    provenance rules ask whether an argument's value was named there. Not text: the call is invalid."""
    value = (params.meta or {}).get(REQUEST)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MCPError(UNKNOWN_TOOL, f"_meta.{REQUEST} must be text (the user's request)")
    return value


def _idempotency_key(params: types.CallToolRequestParams) -> str | None:
    """The client's idempotency key (``_meta["groundstate/idempotency_key"]``): a call sent again with the same key
    — after a crash, a timeout, a restart — gets the recorded result instead of running twice."""
    value = (params.meta or {}).get(IDEMPOTENCY_KEY)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_KEY_CHARS or not value.isprintable():
        raise MCPError(UNKNOWN_TOOL, f"_meta.{IDEMPOTENCY_KEY} must be printable text of 1 to {MAX_KEY_CHARS} "
                                     "characters")  # fmt: skip
    return value


class Departures:
    """HTTP exchanges whose client closed the connection before the answer, by the number ``_bearer`` gave each
    (``EXCHANGE_STATE``), the newest ``limit`` kept. The transport notes them as its ASGI ``receive`` passes
    ``http.disconnect``; a held call's wait asks about its own exchange — never about a session id or a JSON-RPC id
    a client chose (keyed so, one account's departed request 7 withdrew every account's held request 7)."""

    def __init__(self, limit: int = 10_000) -> None:
        self._gone: dict[int, None] = {}
        self.limit = limit

    def add(self, exchange: int) -> None:
        if len(self._gone) >= self.limit:
            self._gone.pop(next(iter(self._gone)))
        self._gone[exchange] = None

    def __contains__(self, exchange: object) -> bool:
        return exchange in self._gone


class _NotForwarded(GroundstateError):
    """A permitted call the journal will not let run (in doubt, or already run with a result too large to keep)."""


def refused(text: str, decision: dict[str, Any]) -> types.CallToolResult:
    """A refused call as its caller's model reads it: an error result (``isError``) whose text is the decision, the
    reasons and who decided, with the structured decision in ``_meta["groundstate/decision"]``."""
    said = f"{text} (decided by {decision['by']})"
    return types.CallToolResult(content=[types.TextContent(type="text", text=said)], is_error=True,
                                meta={DECISION: decision})  # fmt: skip


def _withheld(verdict: Verdict, entry: int, named: str, why: str) -> types.CallToolResult:
    """A call that ran whose result could not be kept for the next guard (``Guard._keep``): its client does not
    read it, and is told the call ran."""
    text = (f"withheld: {named} ran (call {entry} in the guard's ledger), but its result could not be kept in the "
            f"store for the guards that judge later calls ({why}), so it is not passed on. Its effect stands: do "
            f"not repeat the call unasked.")  # fmt: skip
    return refused(text, _details(verdict, entry, "the guard's kept history", "withheld", [why]))


def _parked(verdict: Verdict, entry: int, timeout: float) -> types.CallToolResult:
    """A held call's answer once the guard stops waiting for the operator: nothing ran; the identical call, sent
    again, learns the outcome (and runs, once approved)."""
    text = (f"held: {'; '.join(verdict.reasons)}. Nothing ran: an operator must approve this call first (call {entry} "
            f"in the guard's ledger: `groundstate approvals approve {entry}`, or the console). Send the same call "
            f"again (same tool, same arguments) to learn the outcome: once approved, it runs then; undecided "
            f"{timeout:g} s after it was made, it is denied.")  # fmt: skip
    decision = {**_details(verdict, entry, "the policy", "held"), "ask_again": True}
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True,
                                meta={DECISION: decision})  # fmt: skip


async def _progress(report: Callable[[float, str], Awaitable[None]], entry: int, waited: float) -> None:
    """A progress notification for a held call, when its client asked for them (a ``progressToken``): clients that
    reset their request timeout on progress (the TypeScript SDK's ``resetTimeoutOnProgress``) keep waiting."""
    await report(waited, f"held for an operator's approval (call {entry})")


def _details(
    verdict: Verdict, entry: int, by: str, decision: str | None = None, reasons: list[str] | None = None
) -> dict[str, Any]:
    return {"entry": entry, "call": verdict.call, "decision": decision or verdict.decision, "by": by,
            "policy_decision": verdict.decision, "reasons": reasons or verdict.reasons, "digest": verdict.digest,
            "why": verdict.why, "policy": verdict.policy}  # fmt: skip


@contextlib.asynccontextmanager
async def _guard(
    settings: ProjectConfig, store_url: str, client: str, departures: Departures | None = None,
    named: str | None = None,
) -> AsyncIterator[tuple[Server, Upstreams, Guard]]:  # fmt: skip
    """The upstreams connected (and your own Python tools, as the server ``python``), the MCP server over them and
    the guard that decides its calls, for as long as the block runs (``named``: the name of the history every call
    shares, see ``Guard``)."""
    config = settings.mcp
    one_line_sdk_logs()  # the SDK's errors (an upstream's answer it cannot parse) without tracebacks: sdk_log.py
    if local_tools.SERVER in config.servers:
        raise McpServerError(f"mcp.servers.{local_tools.SERVER}: the guard lists your own Python tools under that "
                            "name; give the server another one")  # fmt: skip
    if settings.tools.modules:
        tools.load_modules(settings.tools.modules, settings.tools.path)
    async with contextlib.AsyncExitStack() as stack:
        logs = home() / "logs"  # the upstreams' stderr: a client shows the guard's own as its log
        upstreams = await connect(config.servers, stack, config.start_timeout_sec, partial=True, logs=logs)
        for failure in [*upstreams.failed.values(), *upstreams.left_out]:  # one line each; the guard serves the rest
            print(f"groundstate mcp guard: left out {failure}", file=sys.stderr, flush=True)
        if tools.REGISTRY:
            upstreams.tools[local_tools.SERVER] = local_tools.listed()
            workspace = home() / "mcp-workspace"  # the one place your tools may write
            upstreams.sessions[local_tools.SERVER] = local_tools.LocalTools(workspace)
        ledger = Ledger(store_url, settings.audit.key())  # [audit] sign: the store's chain head signed
        approvals = Approvals(ledger, config.approval_timeout_sec, config.hold_wait_sec)
        # one database and one chain: a call's admission is one transaction
        journal = ToolJournal(store_url, engine=ledger.engine, chain=ledger.chain)
        policy = McpPolicy(list(config.policy), labels_may_loosen=config.labels_may_loosen,
                           shadow=list(config.shadow) or None)  # fmt: skip
        history = History(config.history_calls, config.history_bytes)
        # what clients were told outlives the guard: a stdio client may start a guard per call, and its session
        # continues in the next; an HTTP account's history continues in a restarted guard and is shared with the
        # other guards on this store (kept_history.py, shared_histories.py)
        kept = KeptHistory(ledger.engine, config.history_calls, config.history_bytes)
        kept.forget_gone()
        labels = {name: {tool: list(given) for tool, given in server.labels.items()}
                  for name, server in config.servers.items()}  # fmt: skip
        guard = Guard(upstreams, policy, ledger, approvals, journal, client, history=history, labels=labels,
                      departures=departures, kept=kept, named=named)  # fmt: skip
        server = Server("groundstate-guard", on_list_tools=guard.list_tools, on_call_tool=guard.call_tool)
        try:
            yield server, upstreams, guard
        finally:  # the last answers' results journaled before the store closes, even while the guard is cancelled
            await asyncio.shield(guard.journaled())


def _loop_first() -> None:
    """The event loop given Python's lock within ``SWITCH_INTERVAL_SEC`` of asking for it while a worker thread
    reads a session's megabytes (its provenance, ``Guard._in_session``). At CPython's 5 ms, each of the loop's
    system calls handed the lock to that thread for up to 5 ms more, and another session's small call, which makes
    dozens, waited 0.4–1.2 s behind a 5 MB result; at 0.5 ms, 0.1–0.4 s (tests/guard/test_http_guard.py). The
    guard owns its process, so the setting is its own."""
    sys.setswitchinterval(SWITCH_INTERVAL_SEC)


def _started(upstreams: Upstreams, where: str) -> None:
    for full, shown in upstreams.shortened():
        print(f"groundstate mcp guard: the tool {full} is listed as {shown} (OpenAI's and Anthropic's APIs refuse "
              "function names over 64 characters)", file=sys.stderr, flush=True)  # fmt: skip
    tools = sum(len(t) for t in upstreams.tools.values())
    print(f"groundstate mcp guard: {len(upstreams.tools)} upstream server(s), {tools} tools, on {where}",
          file=sys.stderr, flush=True)  # fmt: skip


async def serve_stdio(settings: ProjectConfig, store_url: str, named: str | None = None) -> None:
    """Connect the upstreams, then serve MCP on stdin/stdout until the client goes away (decisions recorded in the
    database at ``store_url``; ``named``: the name of the history its calls share with other guards')."""
    async with _guard(settings, store_url, "stdio", named=named) as (server, upstreams, guard):
        long_lived.started()
        _loop_first()
        _started(upstreams, "stdio")
        # every line measured before the SDK's recursive parser sees it
        async with claimed_stdio() as (bounded, wire):
            lines = FastCalls(guard.answer, wire.send, wire.gone).passed_on(bounded)  # tools/call here: fast_calls.py
            async with stdio_server(lines, wire) as (read, write):  # type: ignore[arg-type]
                await server.run(read, write, server.create_initialization_options())


async def serve_http(settings: ProjectConfig, store_url: str, host: str, port: int, operators: Operators) -> None:
    """Serve MCP over streamable HTTP at ``http://HOST:PORT/mcp``; every request needs the token of an operator
    account whose role may act (a viewer's is a 403, no token or an unknown one a 401)."""
    import uvicorn

    departures = Departures()
    async with _guard(settings, store_url, "http", departures) as (server, upstreams, _):
        app = _bearer(server.streamable_http_app(host=host), operators, departures)
        long_lived.started()
        _loop_first()
        listener = _listening(host, port)
        _started(upstreams, f"http://{host}:{port}/mcp")
        try:
            # stopped, it gives open requests (a call held for an operator) SHUTDOWN_GRACE_SEC, then closes them
            config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                    timeout_graceful_shutdown=SHUTDOWN_GRACE_SEC)  # fmt: skip
            await uvicorn.Server(config).serve(sockets=[listener])
        finally:
            listener.close()
            await asyncio.to_thread(tracing.flush)  # the last calls' spans, before the process ends


def _listening(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening before the line that says the guard serves there: a client that
    waits for that line and connects at once is queued, never refused (found in CI on a slow machine, when uvicorn
    bound the socket itself after the line). An address that cannot be bound is named, without a traceback."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        raise ConfigurationError(f"mcp serve --http {host}:{port}: cannot listen there: {exc.strerror or exc}") \
            from None  # fmt: skip
    return listener


def _bearer(app: Any, operators: Operators, departures: Departures | None = None) -> Any:
    """``app`` behind an operator account's bearer token; lifespan events pass. An MCP session belongs to the account
    that opened it: a request naming another account's session (its ``mcp-session-id``) is a 403, one naming a
    session this guard did not open (or that ended) a 404, one naming two a 400 (http_sessions.py) — a session's
    request vouches for its calls, and its cancellations withdraw them."""
    owners = SessionOwners()
    exchanges = itertools.count(1)

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            sent = headers.get(b"authorization", b"").decode("latin-1")
            who = operators.authenticate(sent.removeprefix("Bearer ").strip()) if sent.startswith("Bearer ") else None
            refused: GroundstateError | None = None
            session: bytes | None = None
            if who is None:
                refused = AuthenticationError("missing or wrong token (Authorization: Bearer <an operator's token>)")
            elif not who.may(ACT):
                refused = AccessError(f"operator {who.name!r} is a {who.role}, who may not act")
            elif scope["path"].rstrip("/") != MCP_PATH:  # the SDK's own 404 was plain text, with no code
                refused = UnknownPath(f"the guard serves MCP at {MCP_PATH}, not at {scope['path'][:200]!r}")
            else:
                try:
                    session = owners.session_of(scope["headers"])
                except TwoSessionIds as exc:
                    refused = exc
                else:
                    refused = None if session is None else owners.check(session, who.name)
            if refused is not None:
                problem = http_problem(refused)
                headers_out = [(b"content-type", b"application/json")]
                if isinstance(refused, AuthenticationError):  # which credential to send: only when one is missing
                    headers_out.append((b"www-authenticate", b"Bearer"))
                await send({"type": "http.response.start", "status": problem.status, "headers": headers_out})
                body = {"error": problem.message, "code": problem.code}
                await send({"type": "http.response.body", "body": json.dumps(body).encode()})
                return
            assert who is not None
            state = scope.setdefault("state", {})
            state[OPERATOR_STATE] = who.name  # the call's client names the account
            send = _binding(send, owners, who.name, session if scope.get("method") == "DELETE" else None)
            if departures is not None and scope.get("method") == "POST":
                state[EXCHANGE_STATE] = exchange = next(exchanges)
                receive = _watching(receive, exchange, departures)
        await app(scope, receive, send)

    return guarded


MCP_PATH = "/mcp"  # where the SDK's streamable HTTP app serves


def _watching(receive: Any, exchange: int, departures: Departures) -> Any:
    """``receive``, noting the exchange as departed when ``http.disconnect`` passes through it (the SDK's response
    listens for it while the call is handled)."""

    async def receiving() -> Any:
        message = await receive()
        if message["type"] == "http.disconnect":
            departures.add(exchange)
        return message

    return receiving


def _binding(send: Any, owners: SessionOwners, account: str, ending: bytes | None) -> Any:
    """``send``, telling ``owners`` of the head of the SDK's answer: the session it opens for ``account``, the
    session ``ending`` (a DELETE's) it agreed to end."""

    async def sending(message: Any) -> None:
        if message["type"] == "http.response.start":
            owners.answered(message, account, ending)
        await send(message)

    return sending


def _arguments_chars(flattened: list[tuple[str, Any]]) -> int:
    """About how much text provenance reads in a call's arguments: every key (its parts are candidate values) and
    every value as text — an integer's digits too (found by an attack: 255 keys of 14,000 characters, or integers of
    4,000 digits, were read on the event loop, which counted only string values)."""
    return sum(len(key) + (len(value) if isinstance(value, str) else
                           value.bit_length() // 3 if isinstance(value, int) else 8) for key, value in flattened)


def _result_chars(result: types.CallToolResult) -> int:
    """About how much text provenance reads in a result: its text blocks' characters and its structured content's,
    the latter counted only up to ``ON_LOOP_CHARS`` (an attack sent a two-character text block beside megabytes of
    structured content, which were then read on the event loop)."""
    texts = sum(len(str(getattr(block, "text", "") or "")) for block in result.content or [])
    if texts > ON_LOOP_CHARS or result.structured_content is None:
        return texts
    return texts + _structured_chars(result.structured_content, ON_LOOP_CHARS + 1 - texts)


def _structured_chars(structured: Any, limit: int) -> int:
    """The characters of a structured result's keys and scalars, counted until they pass ``limit`` (a bounded walk:
    on the loop it costs at most ``limit`` steps, however large the content)."""
    pending, counted = [structured], 0
    while pending and counted <= limit:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value)  # its keys, counted as strings
            pending.extend(value.values())
        elif isinstance(value, list):
            counted += 1
            pending.extend(value)
        else:
            counted += len(value) if isinstance(value, str) else 8
    return counted
