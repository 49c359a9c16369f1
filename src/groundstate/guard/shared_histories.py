"""A shared history — an HTTP account's, or one the operator named (``mcp serve --history NAME``) — kept in the store
and caught up before each of its calls.

Over HTTP an operator account's sessions share what they were told (callers.py): a mail read in one session ties the
address a later session sends to. That history lived in one guard process, so a restarted guard — or a second one on
the same store, behind one load balancer — judged the account's next send against nothing while the agent's model
still held the mail. So every result an account's call returns is kept in the store (kept_history.py, under the
account's history key) before the client reads it, and before each of the account's calls the guard reads the rows
it does not hold yet: those an earlier process kept (the first time, with what ``KeptHistory.load`` marks) and those
another guard kept since. Both guards then judge against the same results; each keeps its own conversations'
declared requests (a request vouches for its own session only, and that session lives in one guard). A history the
operator named is shared the same way by every stdio guard started with the name: a client whose guards cannot be
told apart by their parent process (a launcher that does not ``exec`` them, PID 1 of a container) is still one
conversation.

What a guard holds of each history's kept rows is remembered with the ``Session`` it was read into: a session the
history forgot to make room for others is read whole again. A result this guard kept itself is not read back in (its
call is in the session already). On SQLite the rows past the last result read are all a catch-up reads (an index
range, ~35 µs when nothing is new: the table never gives an id again); on PostgreSQL every id of the history's rows.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from ..provenance import Kept, Session
from ..store import in_store
from .kept_history import Held, KeptHistory

MAX_ACCOUNTS = 4096  # accounts whose kept rows this guard remembers holding (the least recently used forgotten)


class SharedHistories:
    """The kept rows each shared history holds in this guard, and the catching up on the others."""

    def __init__(self, kept: KeptHistory) -> None:
        self.kept = kept
        self._held: OrderedDict[str, tuple[Session, Held]] = OrderedDict()  # per history key
        self._lock = threading.Lock()  # for the table: catch-ups run on the loop and in worker threads

    async def catch_up(self, key: str, session: Session, absorb: Callable[[list[Kept]], Awaitable[None]],
                       most: int) -> None:  # fmt: skip
        """``session`` (the history ``key``'s) given the results kept for it that it does not hold yet, by
        ``absorb`` (off the event loop when they are large: past ``most`` characters); marked when something it was
        told cannot be read (see ``KeptHistory.catch_up``)."""
        with self._lock:
            had = self._held.get(key)
        held = had[1] if had is not None and had[0] is session else None
        own = session.by_call.__contains__  # results this guard kept itself
        # on the event loop when it is a few rows of a few characters (SQLite: the usual catch-up, nothing new); a
        # first read, or new results past ``most`` characters, in a worker thread (found by an attack: a mebibyte
        # read on the loop stalled every account's calls)
        found = None if held is None else await in_store(self.kept.engine, self.kept.catch_up, key, held, own, most)
        if found is None:
            found = await asyncio.to_thread(self.kept.catch_up, key, held, own)
        assert found is not None  # (without a bound, it reads whatever it finds)
        parts, now, unseen = found
        if parts:
            await absorb(parts)
        if unseen:
            with session.lock:
                session.overflowed = True
        with self._lock:
            had = self._held.pop(key, None)
            if had is None or had[0] is not session or had[1].after <= now.after:  # (two at once: the furthest)
                had = (session, now)
            self._held[key] = had
            while len(self._held) > MAX_ACCOUNTS:
                self._held.popitem(last=False)
