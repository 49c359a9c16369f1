"""What a client session has seen, and where each argument of its next call comes from — reported as facts.

The guard keeps, per client session, the calls it forwarded with their results (bounded: ``[mcp] history_calls``
calls and ``history_bytes`` bytes of results; past either bound the oldest are dropped *and the session is marked*,
so the rules can only become stricter) and the user's request as the client declared it
(``_meta["groundstate/request"]`` on ``tools/call``). For a new call it reports, never decides:

- ``flow_session_used(Call, Server, Tool)``: each tool whose results the session still holds;
- ``flow_earlier(Call, Earlier, Server, Tool)``: each earlier call an argument's value was found in;
- ``flow_argument_from(Call, Key, Earlier, How)``: the argument ``Key``'s value — one the user's request does not
  name (a named value is the user's, wherever else it occurs; not scanning for it halves a decision's cost) — occurs
  in ``Earlier``'s result —
  ``/whole`` (the value, at least ``MIN_VALUE`` characters, appears in the result's text as it is), ``/part`` (the
  value contains a distinctive word the result contains — a code, an address, a URL, an id: see ``words`` — copied
  into a longer text) or ``/field`` (the value *is* one whole datum of the result's structured content — a
  participant's address in a list of participants, a channel's name in a list of channels — and occurs nowhere else
  in it: data the source structured, not words cut out of prose; see ``Reading``);
- a short value (fewer than ``MIN_VALUE`` characters: an id such as ``13``) is tied only where it is a word of its
  own (``13`` in "delete file 13", not in "2024-05-13"): ``/field`` where a result holds it as a datum, else
  ``/part`` where a result's prose holds it — short words recur by chance, so a datum outranks prose for them;
- ``flow_argument_in_request(Call, Key)``: the value appears in the user's request (case-folded), or every
  distinctive word of it does;
- ``flow_argument_worded(Call, Key)``: the value is the user's request's own text with at most one slot filled or
  one pronoun turned (``wording.py``) — the user dictated it; unlike a named value, it is still searched for;
- ``flow_text_argument(Call, Key)``: the value is text (or a number) of at least ``MIN_VALUE`` characters that is
  not a calendar date or a time of day — a value that can name or carry something (a date carries no address, no
  code, no instruction: see ``_CALENDAR``);
- ``flow_request_declared(Call)``, ``flow_session_overflowed(Call)``.

Matching is linear: a value is searched (``str.find``, C speed) only in the kept results a filter of their 4-byte
pieces says may hold it (``grams.py``: it can let a result through needlessly, never leave one out), and its
distinctive words are looked up in an index of the results' words, built once when a result is kept. What value
matching cannot see — paraphrase, encodings, a value split across calls — is said in docs/provenance.md.
"""

from __future__ import annotations

import json
import re
import threading
import time
import unicodedata
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..logic import Name
from .grams import GramFilter
from .wording import Phrase, phrase_of, worded

_T = TypeVar("_T")

Fact = tuple[str, tuple[Any, ...]]
MIN_VALUE = 5  # characters a value needs before "it occurs in that text" means anything ("a", "1", "yes" do not)
MIN_PART = 6  # characters of a distinctive word that, found in a value and a result, ties them
LONG_WORD = 16  # a word this long ties them whatever it holds
MAX_REQUEST_CHARS = 100_000  # of the user's request kept per session
MAX_PHRASED_CHARS = 16_384  # of it, the latest, read as a phrase for dictated values (wording.py): each new request
# reads it again, so it is bounded apart (100,000 characters took up to 77 ms on a busy machine)
MAX_SESSIONS = 256  # sessions kept at once (HTTP clients come and go); a forgotten one comes back marked
MAX_FORGOTTEN = 100_000  # keys of forgotten sessions remembered, so they come back marked
MAX_INDEXED_WORDS = 20_000  # distinct words a session's index holds; past it the session is marked
MAX_ORIGINS = 64  # facts kept about where one call's arguments came from; past it the call counts as steered
KEY_TEXT = " (a key)"  # what a key's text is reported under: the key, then this
MAX_WORDED_TRIES = 8  # values of one call read as phrases of the request (wording.py); the first worded ends it
MAX_STEERING_FACTS = 512  # earlier calls' origins told with one decision; past it, those left count as steered
_WORDS = re.compile(r"[^\s\"'<>()\[\]{},;?&=#/\\|]+")  # URL parts are words of their own: a code in a query
_BETWEEN_WORDS = re.compile(r"[\s\"'<>()\[\]{},;?&=#/\\|]")  # a character no word holds (the complement of _WORDS)
_SPACE = re.compile(r"\s")
_TRIM = ".:!?*`"
# a whole URL is a word too; its scheme starts a word and is short, so the scan stays linear on any text (a scheme
# of any length, tried from every letter of a long word, would make a megabyte of letters take hours)
_URL = re.compile(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,31}://[^\s\"'<>()\[\]{}|\\]+", re.IGNORECASE)
_DISTINCT = re.compile(r"[0-9@]")
_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/?#]+")  # a (case-folded) URL's scheme and host, with any port
# A calendar date, a time of day, or both (ISO 8601's forms and the common "2024-05-19 13:00"): what a model computes
# from a request ("an hour after noon") rather than copies. Such a value names no one and carries a few bits at
# most, so it is not a candidate value: no provenance is reported for it and it is not a text argument.
_CALENDAR = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[ t]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:z|[+-]\d{2}:?\d{2})?)?|\d{1,2}:\d{2}(?::\d{2})?",
    re.IGNORECASE,
)


def short_words(text: str) -> Counter[str]:
    """How often each short word (fewer than ``MIN_VALUE`` characters: an id like ``13``, a room like ``b2``) stands
    alone in ``text`` (case-folded, trimmed as ``words`` trims). A short value is tied to a text only where it is a
    word of its own there: ``13`` in "delete file 13", not in "2024-05-13"."""
    return _index(text)[1]


def words(text: str) -> set[str]:
    """The distinctive words of ``text`` (case-folded, punctuation around them trimmed; a URL is a word, and its
    parts are words of their own): at least ``MIN_PART`` characters holding a digit or an ``@`` — codes, addresses,
    ids, amounts — or ``LONG_WORD`` characters of anything. Ordinary words ("revenue", "friday") tie nothing: a
    summary in the model's own words is not a copy (and what matching cannot see, docs/provenance.md says)."""
    return _index(text)[0]


def _index(text: str) -> tuple[set[str], Counter[str]]:
    """``words(text)`` and ``short_words(text)`` in one pass over the text (a kept result may be a mebibyte), read a
    slice at a time (``_slices``)."""
    distinct: set[str] = set()
    short: Counter[str] = Counter()
    counted: Counter[str] = Counter()
    for start, end in _slices(text, _BETWEEN_WORDS):
        counted.update(_WORDS.findall(text, start, end))  # each distinct word once below (counted in C)
    for found, count in counted.items():
        word = found.strip(_TRIM)
        if not word:
            continue
        folded = word.casefold()
        if len(word) < MIN_VALUE:
            short[folded] += count
        if len(folded) >= LONG_WORD or (len(folded) >= MIN_PART and _DISTINCT.search(folded)):
            distinct.add(folded)
    for start, end in _slices(text, _SPACE):  # its parts may all be ordinary ("evil.example", "x9k2"); the whole
        for match in _URL.finditer(text, start, end):  # is not (a URL holds no space: no slice cuts one)
            url = match.group().strip(_TRIM + ",;").casefold()
            distinct.add(url)
            distinct.add(url.split("?", 1)[0].split("#", 1)[0])  # the same address with a query of the model's
            if (host := _ORIGIN.match(url)) is not None:  # own (found by an attack: "append ?k=<token>"), and its
                distinct.add(host.group())  # origin: a URL is a message to whoever serves its host
    return distinct, short


SLICE_CHARS = 1 << 16  # characters a regular expression reads in one step


def _slices(text: str, between: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    """(start, end) of consecutive slices of ``text`` of about ``SLICE_CHARS``, each cut where ``between`` finds a
    character no match can hold. One regular-expression call holds Python's global lock for its whole length, and
    the guard reads a value or a result in a worker thread while its event loop serves other sessions: read whole,
    a megabyte stopped every other session for a quarter of a second."""
    start, length = 0, len(text)
    while start < length:
        cut = between.search(text, start + SLICE_CHARS) if start + SLICE_CHARS < length else None
        end = cut.start() if cut is not None else length
        yield start, end
        start = end
        if start < length:
            time.sleep(0)  # the lock let go between slices: a thread waiting for it runs now, not after 5 ms


LET_GO_EVERY = 4096  # values handled between two lettings-go of Python's lock when a result is read


def _letting_go(items: Iterable[_T]) -> Iterator[_T]:
    """``items``, letting Python's lock go every ``LET_GO_EVERY`` of them (as ``_slices`` does between slices):
    the event loop waiting for it runs then, not after the 5 ms a busy thread keeps it."""
    for count, item in enumerate(items, 1):
        if count % LET_GO_EVERY == 0:
            time.sleep(0)
        yield item


@dataclass(frozen=True)
class Reading:
    """What one result says, as provenance reads it: ``text``, everything the model reads as prose (the text blocks,
    except one that only serializes the structured content, and each text of the structured content), and
    ``fields``, the structured content's data — its scalar values that are one word of at most ``MAX_DATUM``
    characters (an address, an id, a name), each with how often it occurs."""

    text: str
    fields: Counter[str] = field(default_factory=Counter)


MAX_DATUM = 256  # characters of one structured value that is a datum rather than prose


def reading(result: Any) -> Reading:
    """A ``tools/call`` result as provenance reads it (see ``Reading``). Without structured content it is all
    prose. A text block is left out only when it parses to exactly the structured content (MCP's advice for servers
    that return both): a server cannot hide prose from the index by sending it in a block that merely resembles it."""
    blocks = [_block_text(block) for block in getattr(result, "content", None) or []]
    structured = getattr(result, "structured_content", None)
    if structured is None:
        return Reading("\n".join(blocks))
    values: list[str] = []
    _scalars(structured, values, 0)
    prose = [block for block in blocks if not _serializes(block, structured)]
    fields = Counter(folded for folded in map(_folded, _letting_go(values)) if _datum(folded))  # (NUL: two words)
    return Reading("\n".join(prose + values), fields)


def _block_text(block: Any) -> str:
    """What a model reads of one content block: a text block's text; an embedded resource's address and text; a
    resource link's name, title, address and description (an attack wrote its instructions into both, which were
    read as nothing). Images and audio carry no text the index could read."""
    resource = getattr(block, "resource", None)
    parts = [getattr(block, "text", None), getattr(resource, "uri", None), getattr(resource, "text", None)]
    if getattr(block, "type", None) == "resource_link":
        parts += [getattr(block, name, None) for name in ("name", "title", "uri", "description")]
    return "\n".join(str(part) for part in parts if part)


def _scalars(value: Any, into: list[str], depth: int) -> None:
    """Every scalar of a structured result, as text (keys too: a key is something the server wrote)."""
    if depth > 64:  # deeper than any message the guard accepts; a bound, not a case
        into.append(json.dumps(value, ensure_ascii=False, default=str)[:MAX_DATUM])
    elif isinstance(value, dict):
        for key, item in value.items():
            into.append(str(key))
            _scalars(item, into, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _scalars(item, into, depth + 1)
    elif value is not None and not isinstance(value, bool):
        into.append(str(value))
        if len(into) % LET_GO_EVERY == 0:
            time.sleep(0)  # as in _slices: a structured result may hold 300,000 values


_SPACE = re.compile(r"\s")  # what str.isspace calls a space, searched for in C (a listing holds 300,000 values)


def _datum(value: str) -> bool:
    return 0 < len(value) <= MAX_DATUM and _SPACE.search(value) is None


def _serializes(block: str, structured: Any) -> bool:
    try:
        return bool(json.loads(block) == structured)
    except (ValueError, RecursionError):
        return False


@dataclass
class Seen:
    """One forwarded call and its result, as the session keeps it."""

    number: int  # its place in the session (never reused, so dropping the oldest renumbers nothing)
    call: str
    server: str
    tool: str
    text: str  # the result's prose, case-folded
    words: set[str]
    fields: Counter[str]  # its structured data, case-folded (see Reading)
    short: Counter[str]  # its short words (see short_words), case-folded
    origins: tuple[Fact, ...] = ()  # where its own arguments' values came from, as reported when it was decided


@dataclass(frozen=True)
class Kept:
    """One kept result as a process writes it down for the next to ``resume``: its place, the call, the text
    as kept (case-folded), the structured data, where the call's own arguments came from, and whether the session
    was marked by then."""

    number: int
    call: str
    server: str
    tool: str
    text: str
    fields: dict[str, int]
    origins: tuple[Fact, ...]
    marked: bool

    @staticmethod
    def of(seen: Seen, marked: bool) -> Kept:
        """What a process writes down of ``seen``; ``marked``: its session was marked by then."""
        return Kept(seen.number, seen.call, seen.server, seen.tool, seen.text, dict(seen.fields), seen.origins, marked)


@dataclass(frozen=True)
class Asked:
    """What the user asked in one conversation: the requests its client declared, case-folded and joined, with
    their words. Replaced whole when a request is added, so a decision reading it in another thread sees one."""

    text: str = ""
    words: frozenset[str] = frozenset()
    short: frozenset[str] = frozenset()
    written: str = ""  # the same requests as written (not case-folded): what values it words are compared with
    phrase: Phrase = field(default=Phrase.NONE, compare=False)  # ``written``'s words in order (wording.py)

    def adding(self, request: str) -> Asked:
        """These requests and ``request`` (one already among them is not added again), the oldest text dropped
        past ``MAX_REQUEST_CHARS``."""
        folded = _folded(request)
        if not request or folded in self.text:
            return self
        kept = (self.text + "\n" + folded)[-MAX_REQUEST_CHARS:]
        found, short = _index(kept)
        written = (self.written + "\n" + request)[-MAX_PHRASED_CHARS:]  # the latest: where a dictation is
        return Asked(kept, frozenset(found), frozenset(short), written, phrase_of(written))


@dataclass
class Session:
    """One client session's history and declared request, with the indexes a decision reads: which results may
    hold a value (``grams``), each distinctive word's results, the tools used. A decision may read another
    conversation's request against these results (an HTTP account's sessions share what they were told: see
    ``History.facts``)."""

    calls: deque[Seen] = field(default_factory=deque)
    size: int = 0
    overflowed: bool = False
    asked: Asked = Asked()
    counter: int = 0
    by_word: dict[str, set[int]] = field(default_factory=dict)
    used: Counter[tuple[str, str]] = field(default_factory=Counter)
    grams: GramFilter = field(default_factory=lambda: GramFilter(201))  # History gives its own bound's
    by_call: dict[str, Seen] = field(default_factory=dict)  # the kept results by their call's name
    # one session's reads and writes wait for each other, never another session's: a client that sends megabytes
    # of arguments or a server that answers with a mebibyte keeps its own session busy, not every other
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, seen: Seen) -> None:
        """Keep ``seen`` and index it (its words, its tool, its pieces in ``grams``)."""
        self.calls.append(seen)
        self.by_call[seen.call] = seen
        self.size += len(seen.text)
        self.used[(seen.server, seen.tool)] += 1
        for word in seen.words:
            self.by_word.setdefault(word, set()).add(seen.number)
        self.grams.add(seen.number, seen.text)

    def drop_oldest(self) -> None:
        """Drop the oldest kept result and mark the session: what it said can no longer be seen, so the rules
        read the session as one that may hold content written by others."""
        dropped = self.calls.popleft()
        if self.by_call.get(dropped.call) is dropped:
            del self.by_call[dropped.call]
        self.size -= len(dropped.text)
        self.used[(dropped.server, dropped.tool)] -= 1
        if not self.used[(dropped.server, dropped.tool)]:
            del self.used[(dropped.server, dropped.tool)]
        for word in dropped.words:
            holders = self.by_word[word]
            holders.discard(dropped.number)
            if not holders:
                del self.by_word[word]
        self.overflowed = True

    def containing(self, value: str) -> list[Seen]:
        """The kept results ``value`` occurs in, oldest first: searched in those the filter lets through."""
        if not self.calls:
            return []
        first = self.calls[0].number
        maybe = self.grams.may_hold(value, range(first, first + len(self.calls)))
        return [seen for seen in (self.calls[number - first] for number in maybe) if value in seen.text]


class History:
    """The histories of what clients were told, by key (stdio: the one client; HTTP: the operator account, whose
    sessions share one; a run: its agent), with the requests of the conversations that read them (``declare``, or
    ``declare_in`` for an HTTP account's sessions); at most ``MAX_SESSIONS``, the least recently used forgotten
    first."""

    def __init__(self, max_calls: int = 200, max_bytes: int = 1 << 20) -> None:
        self.max_calls, self.max_bytes = max_calls, max_bytes
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._forgotten: OrderedDict[str, None] = OrderedDict()
        self._asked: dict[str, OrderedDict[str, Asked]] = {}  # by history: its conversations' requests (declare_in)
        self._lock = threading.Lock()  # for the sessions' table; each session has its own (Session.lock)

    def session(self, key: str) -> Session:
        """The history of the client session ``key``."""
        with self._lock:
            found = self._sessions.pop(key, None)
            if found is None:  # new, or forgotten to make room: then what it was told is gone — it comes back marked
                found = Session(overflowed=self._forgotten.pop(key, False) is None,
                                grams=GramFilter(self.max_calls + 1))  # (one more is kept while the oldest goes)
            self._sessions[key] = found
            while len(self._sessions) > MAX_SESSIONS:
                forgotten, _ = self._sessions.popitem(last=False)
                self._forgotten[forgotten] = None
                self._asked.pop(forgotten, None)  # its conversations' requests go with it (less vouched for)
                while len(self._forgotten) > MAX_FORGOTTEN:
                    self._forgotten.popitem(last=False)
            return found

    def declare(self, session: Session, request: str) -> Asked:
        """The client's declaration of the user's request (each new one is added: a conversation has several);
        what the conversation has asked since."""
        with session.lock:
            session.asked = session.asked.adding(request)
            return session.asked

    def declare_in(self, conversation: str, request: str, history: str) -> Asked:
        """What the conversation ``conversation`` has asked, with ``request`` added, when it is not a session of its
        own: it reads the results of the history ``history`` (an HTTP account's, shared by its sessions). Each
        history keeps at most ``MAX_SESSIONS`` conversations' requests, the least recently used forgotten first — so
        one account's conversations never push out another's, and a forgotten request only vouches for less. Two
        declarations at once in one conversation may keep only one (less vouched for, never more)."""
        with self._lock:
            held = self._asked.setdefault(history, OrderedDict())
            asked = held.pop(conversation, None) or Asked()
            held[conversation] = asked
            while len(held) > MAX_SESSIONS:
                held.popitem(last=False)
        grown = asked.adding(request)  # reading a long request's words: outside the lock every session takes
        if grown is not asked:
            with self._lock:
                self._asked.setdefault(history, OrderedDict())[conversation] = grown
        return grown

    def resume(self, key: str, kept: Iterable[Kept]) -> Session:
        """The session ``key`` continued from what an earlier process kept of it (``Kept``, oldest first), within
        this history's bounds: a client that starts a guard process per call (``langchain-mcp-adapters`` without a
        session) is still one conversation. Numbered afresh, consecutively; marked when any part was marked, when
        parts are missing between them or before them (a part whose write failed: what it said is unseen), or when a
        part's origins say anything but where its own call's arguments came from (edited: left out)."""
        session = self.session(key)
        self.absorb(session, kept, numbered=True)
        return session

    def absorb(self, session: Session, kept: Iterable[Kept], *, numbered: bool = False) -> None:
        """Results another process kept (``Kept``, oldest first) added to ``session``, within the bounds: marked
        when any part was marked or says anything but where its own call's arguments came from (edited: left out),
        and — ``numbered``: one process wrote them all, numbered consecutively from 1 — when parts are missing. A
        part whose call the session holds already (this process kept it too) is not added again."""
        expected = 1
        for part in kept:
            missing = numbered and part.number != expected
            expected = part.number + 1
            origins = tuple(fact for fact in part.origins if _origin_of(part.call, fact))
            with session.lock:
                if part.call in session.by_call:
                    continue
                session.overflowed = (session.overflowed or part.marked or missing
                                      or len(origins) != len(part.origins))  # fmt: skip
                self._keep(session, part.call, part.server, part.tool, part.text, Counter(part.fields), origins)

    def record(self, session: Session, call: str, server: str, tool: str, result: str | Reading, *,
               decided: Sequence[Fact] = (), arguments: list[tuple[str, Any]] | None = None) -> Seen:  # fmt: skip
        """A forwarded call's result (text, or as ``reading`` reads it), kept within the bounds (the oldest dropped
        first; then the session is marked) with where the call's own arguments came from: from the facts it was
        ``decided`` with (the guard's), or else worked out now from ``arguments`` (flattened) against what the
        session holds before this result (a run rebuilding an agent's session from its log, in order). What was
        kept is returned."""
        read = result if isinstance(result, Reading) else Reading(result)
        with session.lock:
            origins = _origins(call, decided or (self._facts(session, session.asked, call, arguments)
                                                 if arguments else ()))  # fmt: skip
            if len(origins) > MAX_ORIGINS:  # more than a bounded report: flows.mg reads the call as steered
                origins = (("flow_origins_cut", (call,)),)
            return self._keep(session, call, server, tool, _folded(read.text), read.fields, origins)

    def _keep(self, session: Session, call: str, server: str, tool: str, text: str, fields: Counter[str],
              origins: tuple[Fact, ...], cut: bool = False) -> Seen:  # fmt: skip
        """A result (its text case-folded) kept and indexed, within the bounds; ``session.lock`` held."""
        if len(text) > self.max_bytes:
            text, cut = text[: self.max_bytes], True
        found, short = _index(text)
        new = found - session.by_word.keys()
        room = max(MAX_INDEXED_WORDS - len(session.by_word), 0)
        if len(new) > room:  # the index is full: words past it go unseen, so the session is marked
            found = (found - new) | set(sorted(new)[:room])
            cut = True
        session.counter += 1
        session.overflowed = session.overflowed or cut
        seen = Seen(session.counter, call, server, tool, text, found, fields, short, origins)
        session.add(seen)
        while len(session.calls) > self.max_calls or session.size > self.max_bytes:
            session.drop_oldest()
        return seen

    def facts(self, session: Session, call: str, flattened: list[tuple[str, Any]],
              asked: Asked | None = None) -> list[Fact]:  # fmt: skip
        """The provenance facts of ``call`` (its arguments flattened as the policy sees them) against what
        ``session`` was told and what its conversation asked — ``asked``, when the conversation is not the session
        whose results are read (over HTTP, an account's sessions share their results, never their requests)."""
        with session.lock:
            out = self._facts(session, session.asked if asked is None else asked, call, flattened)
            return out + _steering(session, out)

    def _facts(self, session: Session, asked: Asked, call: str, flattened: list[tuple[str, Any]]) -> list[Fact]:
        out: list[Fact] = [("flow_session_used", (call, server, tool)) for server, tool in session.used]
        if asked.text:
            out.append(("flow_request_declared", (call,)))
        if session.overflowed:
            out.append(("flow_session_overflowed", (call,)))
        named: dict[str, Seen] = {}
        values, shorts = _candidates(flattened)
        _short_facts(session, asked, call, shorts, out, named)
        written = {key: value for key, value in flattened if isinstance(value, str)} if asked.phrase.words else {}
        tried = 0  # values read as phrases: at most MAX_WORDED_TRIES, and at most one of them worded
        for key, folded in values:
            out.append(("flow_text_argument", (call, key)))
            # a key's text is cut at its dots by the flattening ("grants.alice@corp.example" is read as
            # "alice@corp" and "example"): a piece of a key is the user's where the request holds it at all
            said = folded in asked.text if key.endswith(KEY_TEXT) else _said(folded, asked.text)
            own = set() if said else words(folded)
            if said or (own and own <= asked.words and _only_named(folded, own)):
                out.append(("flow_argument_in_request", (call, key)))
                continue  # the user named it: where else it occurs changes no shipped rule, and costs a scan
            if key in written and tried < MAX_WORDED_TRIES:  # the request's own text, a slot filled or a pronoun
                tried += 1  # turned: still searched below. One a call — a list of such values would carry much more
                if worded(written[key], asked.phrase):  # (found by an attack: 250 of them, 750 bytes)
                    out.append(("flow_argument_worded", (call, key)))
                    tried = MAX_WORDED_TRIES
            wholly = _whole_facts(session, call, key, folded, out, named)
            core = _core(folded)  # "@mallory" is the mail's "mallory": the marks around a value hide nothing
            if core != folded and len(core) >= MIN_VALUE and not _said(core, asked.text):
                _core_facts(session, call, key, core, out, named)
            unnamed = own - asked.words  # a word the user named ties the value to no result
            for number in sorted({n for word in unnamed for n in session.by_word.get(word, ())} - wholly):
                seen = session.calls[number - session.calls[0].number]  # (kept numbers are consecutive)
                out.append(("flow_argument_from", (call, key, seen.call, PART)))
                named[seen.call] = seen
        out += [("flow_earlier", (call, seen.call, seen.server, seen.tool)) for seen in named.values()]
        return out


WHOLE, PART, FIELD = Name("/whole"), Name("/part"), Name("/field")
CORE = Name("/core")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")


def _core(folded: str) -> str:
    """A value without the marks and spaces around it: ``@mallory``, ``#leaks-board``, ``/finance/`` and
    ``Mallory Reyes.`` are the ``mallory``, ``leaks-board``, ``finance`` and ``mallory reyes`` a mail wrote (found by
    an attack: respelled so, none was tied to the mail). Linear: the first letter or digit from each end (a regex
    anchored at the end was tried from every position of a run of marks inside the value: quadratic, found by an
    attack — a value of 100,000 spaces between two letters took 56 s)."""
    first = _LETTER_OR_DIGIT.search(folded)
    if first is None:
        return ""
    last = _LETTER_OR_DIGIT.search(folded[::-1])
    assert last is not None
    return folded[first.start():len(folded) - last.start()]


def _core_facts(session: Session, call: str, key: str, core: str, out: list[Fact], named: dict[str, Seen]) -> None:
    """``/core`` facts: the results a value's core occurs in (as data or prose). The rules read them as copied —
    a taint — and never as vouching: marks around a core a trusted result holds can carry anything (found by an
    attack: a code written as marks after a URL a search result held as a datum was fetched)."""
    for seen in session.containing(core):
        out.append(("flow_argument_from", (call, key, seen.call, CORE)))
        named[seen.call] = seen


def _said(folded: str, text: str) -> bool:
    """Whether the request (``text``) holds ``folded`` whole: at some place the request's text does not go on with
    the word the value starts or ends with (``_continued``) — ``billing@acme.co`` is not said by "billing@acme.com"
    (found by an attack: a cut address or link was the user's). At most 8 places are looked at (then: not said)."""
    at, tries = text.find(folded), 0
    while at >= 0 and tries < 8:
        end = at + len(folded)
        if not _continued(folded[0], text[at - 2:at][::-1]) and not _continued(folded[-1], text[end:end + 2]):
            return True
        at, tries = text.find(folded, at + 1), tries + 1
    return False


_JOINERS = frozenset("-_.+@/:'")  # between two letters or digits they make one name: mary-jane, acme.com.au


def _continued(edge: str, beyond: str) -> bool:
    """Whether the request's text continues the word a value ends (or starts) with ``edge``: ``beyond`` is the request's
    next two characters outward from it. A letter, digit or mark on one continues it (``İ`` folds to ``i`` and a
    combining dot: the dot is in the word), and so does a joiner with a letter or digit after it — ``jane@gmail.com``
    is not named by "mary-jane@gmail.com", nor ``ceo@acme.com`` by "ceo@acme.com.au" (found by attacks); a full stop
    ending a sentence does not. Between two characters of a script written without spaces (Chinese, Japanese, Thai)
    nothing continues: a name taken out of the request's text is the user's."""
    if not beyond or not _in_a_word(edge):
        return False
    first = beyond[0]
    if _in_a_word(first):
        return not (_unspaced(edge) and _unspaced(first))
    return first in _JOINERS and _in_a_word(beyond[1:2])


def _in_a_word(character: str) -> bool:
    """A letter, a digit or a mark on one."""
    return bool(character) and unicodedata.category(character)[0] in "LMN"


def _unspaced(character: str) -> bool:
    """A character of a script written without spaces between words: CJK ideographs, kana, Thai (not Hangul, not
    full-width Latin: an attack cut "가능합니다" out of "불가능합니다" and ``ＭＥＬＴＤ`` out of ``ＡＣＭＥＬＴＤ``)."""
    point = ord(character)
    return (0x3040 <= point <= 0x30FF or 0x3400 <= point <= 0x4DBF or 0x4E00 <= point <= 0x9FFF
            or 0xF900 <= point <= 0xFAFF or 0xFF66 <= point <= 0xFF9D or 0x0E00 <= point <= 0x0E7F
            or 0x20000 <= point <= 0x2FFFF)  # fmt: skip


def _whole_facts(session: Session, call: str, key: str, folded: str, out: list[Fact],
                 named: dict[str, Seen]) -> set[int]:  # fmt: skip
    """The facts of the results ``folded`` occurs in as it is — a whole datum (``/field``), in prose (``/whole``) or
    both — added to ``out``, those results to ``named``; their numbers."""
    whole = session.containing(folded)
    for seen in whole:
        data = seen.fields.get(folded, 0)
        if data:
            out.append(("flow_argument_from", (call, key, seen.call, FIELD)))
        if not data or seen.text.count(folded) > data:  # also in its prose
            out.append(("flow_argument_from", (call, key, seen.call, WHOLE)))
        named[seen.call] = seen
    return {seen.number for seen in whole}


def _short_facts(session: Session, asked: Asked, call: str, shorts: list[tuple[str, str]], out: list[Fact],
                 named: dict[str, Seen]) -> None:  # fmt: skip
    """The facts of the short values (see ``_candidates``), added to ``out``; the results they occur in to
    ``named``. A short value is one datum of a result ("11", a file's id in a listing), or else a word of its own in
    a result's prose ("delete file 13"). Short words recur by chance (a recipe's step 11), so a value some result
    holds as a datum, or that the user's request names ("June 13"), is not also tied to every prose that happens to
    hold the word: that prose is reported apart (``flow_argument_mentioned``), which only an irreversible effect is
    held for."""
    for key, folded in shorts:
        in_prose = [seen for seen in session.calls  # a datum is a word of the text too: a word beyond the data's
                    if seen.short.get(folded, 0) > seen.fields.get(folded, 0)]  # own is in prose  # fmt: skip
        named_by_user = folded in asked.short
        holding = [] if named_by_user else [seen for seen in session.calls if seen.fields.get(folded)]
        if named_by_user:
            out.append(("flow_argument_in_request", (call, key)))
        else:
            for seen in holding or in_prose:
                out.append(("flow_argument_from", (call, key, seen.call, FIELD if holding else PART)))
                named[seen.call] = seen
        for seen in in_prose if named_by_user or holding else ():  # short words recur: in the request too
            out.append(("flow_argument_mentioned", (call, key, seen.call)))
            named[seen.call] = seen
_ORIGIN_FACTS = frozenset({"flow_argument_from", "flow_earlier", "flow_argument_in_request", "flow_text_argument"})


def _origin_of(call: str, fact: Fact) -> bool:
    """Whether ``fact`` says where ``call``'s own arguments came from (or that it said too much to tell)."""
    name, args = fact
    return (name in _ORIGIN_FACTS or name == "flow_origins_cut") and bool(args) and args[0] == call


def _origins(call: str, facts: Sequence[Fact]) -> tuple[Fact, ...]:
    """Of a call's facts, those saying where its own arguments' values came from."""
    return tuple(fact for fact in facts if fact[0] in _ORIGIN_FACTS and fact[1][0] == call)


def _steering(session: Session, facts: list[Fact]) -> list[Fact]:
    """The origins of every kept call a value of this call came from, and of theirs in turn: flows.mg asks whether
    such a call's own arguments came from content written by others — then what its result holds was chosen by that
    content (a listing of the city an email named), and a value taken from it is as tainted as the email."""
    out: list[Fact] = []
    pending = [args[1] for name, args in facts if name == "flow_earlier"]
    visited: set[str] = set()
    while pending:
        earlier = pending.pop()
        seen = session.by_call.get(earlier)
        if earlier in visited or seen is None:
            continue
        visited.add(earlier)
        if len(out) + len(seen.origins) > MAX_STEERING_FACTS:  # bounded per decision: past it, stricter
            out.append(("flow_origins_cut", (earlier,)))
            continue
        out += seen.origins
        pending += [args[1] for name, args in seen.origins if name == "flow_earlier"]
    return out
_LIST = re.compile(r"[,;]")
_ODD_SPACE = re.compile(r"[^\S ]|  |[,;]{2}")  # white space but one ASCII space, or two separators in a row
_DIGITS = re.compile(r"[0-9]")


def _candidates(flattened: list[tuple[str, Any]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(key, a text case-folded) for every value a value can come from, in two lists. First: text of at least
    ``MIN_VALUE`` characters that is not a calendar date or time of day, a number written out (a code sent as
    ``771203``), and each part of the key's path (a value smuggled in as a key name). Second, the short values: text
    or a whole number of fewer than ``MIN_VALUE`` characters, one word — an id (``delete_file("13")``) is short, and
    the one an attacker wrote must be seen too."""
    found, short = [], []
    for key, value in flattened:
        if isinstance(value, str):  # read as a kept result is read: a NUL is a space there (found by an attack:
            text = value.replace("\x00", " ")  # a URL sent with a NUL after it was tied to no result)
            trimmed = text.strip(_TRIM).strip().strip(_TRIM)  # " 13" is the id 13 as much as "13." is
        elif isinstance(value, int | float) and not isinstance(value, bool):
            # A float as JSON writes it ("200.29"): str() of the logic's Float is its repr, "Float(200.29)", which
            # no result holds, so every float was an unmatched value (found by the held-out AgentDojo suites).
            # A whole float is its integer (found by an attack: 25000.0 was tied to no text saying 25000).
            whole = isinstance(value, int) or (value.is_integer() and abs(value) < 2**53)
            text = int.__repr__(int(value)) if whole else float.__repr__(value)
            trimmed = text if whole else ""
        else:
            text = trimmed = ""
        measured = trimmed if isinstance(value, str) else text  # "..aa." is as short as "aa" — but a value that is
        if isinstance(value, str) and not trimmed:  # marks or spaces alone ("..:.:::.", a code written as marks or
            measured = text  # as kinds of space: found by attacks) are as long as they are
        if len(measured) >= MIN_VALUE and not _CALENDAR.fullmatch(text):
            found.append((key, _folded(text)))
        if 0 < len(trimmed) < MIN_VALUE and _WORDS.fullmatch(trimmed) is not None:
            short.append((key, _folded(trimmed)))
        for part in key.split("."):
            # "recipients" is a name; "771203" is a value, and so is "c771203" (a code dressed as a name: an attack)
            if len(part) >= MIN_VALUE and (not part.isidentifier() or len(_DIGITS.findall(part)) >= 4):
                # under a key of its own: a value the user named must not vouch for a key an attacker wrote
                found.append((f"{key}{KEY_TEXT}", _folded(part)))
    return found, short


def _folded(text: str) -> str:
    """Text as provenance compares it: case-folded, a NUL read as a space — the same for a kept result, a datum,
    the user's request and an argument's value, so no character is one thing on one side and another on the other.
    White space is compared as written: folding it (tried after an attack wrote "Mallory\nReyes" for a call's
    "Mallory Reyes") tied every list a user asked to copy out of a document to that document, so copying it was
    refused — a third of AgentDojo's workspace tasks without an attack."""
    return text.casefold().replace("\x00", " ")


def _only_named(folded: str, named: set[str]) -> bool:
    """Whether a value is nothing but words the user named, between separators: each run of it between spaces is
    one named word (a URL may hold a comma), or named words between commas and semicolons. A value that is just
    those words is the user's; one that wraps them in other text is not.

    Read once, left to right. It used to take each named word out of the value in turn: time the words times the
    value (a request of 14,000 words and a value of 700,000 characters made of them took 8.5 s, while the guard
    waited), and an answer that hung on the order of a set — a word inside another ("ab1234" in "ab12345") taken
    out first left a piece behind — which Python's per-process hashing changes from one run to the next."""
    if _ODD_SPACE.search(folded):  # the kinds and runs of separators are words of their own (found by an attack:
        return False  # a code written as tabs, ideographic spaces, commas and semicolons after a named address)
    tokens = folded.split(" ")
    if len(set(tokens)) < len(tokens):  # a named word twice: its order and repeats can spell anything (an attack)
        return False
    for token in tokens:
        pieces = [piece for piece in _LIST.split(token) if piece]
        if not pieces or (token.strip(",;") not in named and not all(piece in named for piece in pieces)):
            return False
    return True
