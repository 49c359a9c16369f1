"""A run's log nobody can quietly edit: every event carries a hash chained to the one before it (per run), and the
run's row keeps the head. ``verify`` recomputes the chain from the stored rows and names the first one that was
changed, removed, inserted or reordered — what the database file's owner could do without groundstate.

An event's link is ``sha256(previous link, its run, type, agent, payload as stored, actor, time)``; the first event
of a run links to nothing (``""``). Its sequence number is its place in the chain, not part of its link, so an event
inserted with the later ones renumbered is still named as inserted. Events written before chains were kept have
none: they are reported as unchained, and the chain starts at the first event that has one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ..store import signature_of

GENESIS = ""


def moment(at: datetime) -> str:
    """A timestamp as the chain reads it: UTC, to the microsecond (what every database here keeps of it)."""
    aware = at if at.tzinfo else at.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# json.dumps with these options builds an encoder per call; one kept here writes the same text
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def link(previous: str, run_id: str, kind: str, agent: str | None, payload: str, actor: str, at: datetime) -> str:
    """The link of one event, chained to ``previous`` (the link before it; ``GENESIS`` for the first)."""
    canonical = _CANONICAL.encode([previous, run_id, kind, agent, payload, actor, moment(at)])
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Row:
    """An event as stored: what its link covers, and the link it carries."""

    seq: int
    kind: str
    agent: str | None
    payload: str
    actor: str
    at: datetime
    chain: str | None
    order: int = 0  # its place in the table (the order events were written in)


@dataclass(frozen=True)
class Verdict:
    """What the chain of one run says: ``ok``, how many events it covers, the events written before chains, and
    — when it is broken — the first event that does not fit and how (changed, removed, inserted, reordered)."""

    run_id: str
    ok: bool
    chained: int
    unchained: int
    head: str
    seq: int | None = None
    how: str = ""
    detail: str = ""
    signed: str = "unsigned"  # the head's signature ([audit] sign): unsigned, signed and checked, or not checked

    def __str__(self) -> str:
        if self.ok:
            before = f" ({self.unchained} earlier events were written before chains)" if self.unchained else ""
            return f"{self.run_id}: verified {self.chained} events, head {self.head or '-'}{before}; {self.signed}"
        if self.how == "unsigned" or self.seq is None:  # no event to name: its signature, or the run's row
            return f"{self.run_id}: not verified: {self.detail}"
        return f"{self.run_id}: event {self.seq} was {self.how}: {self.detail}"


def row_of(values: Any, read_at: Callable[[Any], Any]) -> Row:
    """An event as the store returned it (seq, type, agent, payload, actor, at, chain, id): a value of the wrong
    type — written outside groundstate — is kept so that its link cannot match (the event is named as changed),
    never a crash."""
    seq, kind, agent, payload, actor, at, link, order = values
    try:
        moment_at = read_at(at)
        if not isinstance(moment_at, datetime):
            raise TypeError("not a time")
    except (ValueError, TypeError, AttributeError):
        moment_at = datetime.min.replace(tzinfo=UTC)
    return Row(seq if isinstance(seq, int) else -1, str(kind), agent if agent is None else str(agent),
               payload if isinstance(payload, str) else repr(payload), str(actor), moment_at,
               link if link is None else str(link), order if isinstance(order, int) else 0)  # fmt: skip


def verify(run_id: str, rows: list[Row], head: str | None, last_seq: int, signature: str | None = None,
           key: bytes | None = None, required: bool = False) -> Verdict:  # fmt: skip
    """Recompute the run's chain over ``rows`` (in sequence order) against the run's recorded ``head`` and
    ``last_seq``; the first event that does not fit, and how; then the head's ``signature`` ("SEQ:hmac…", written
    with ``[audit] sign``) with ``key``. ``required`` (``[audit] sign`` is on): a run without a signature, with
    events that carry no link, or with events after its last signed head fails — with signing on every write signs,
    so each of those is an edit (links removed, a signature removed or rolled back)."""
    found = _verify_links(run_id, rows, head, last_seq if isinstance(last_seq, int) else -1)
    if not found.ok:
        return found
    if required and found.unchained:
        return _unsigned(found, f"{found.unchained} events carry no link though [audit] sign is on")
    if signature is None:
        return _unsigned(found, "the run's head carries no signature though [audit] sign is on") if required \
            else found  # fmt: skip
    seq_text, _, mac = str(signature).partition(":")
    if key is None:
        return replace(found, signed="signed, not checked: no key ([audit] key_env)")
    signed_at = next((row for row in rows if str(row.seq) == seq_text and row.chain), None)
    if signed_at is None or not hmac.compare_digest(
            signature_of(key, "run:" + run_id, signed_at.seq, signed_at.chain or GENESIS), mac):  # fmt: skip
        return Verdict(run_id, False, found.chained, found.unchained, found.head,
                       int(seq_text) if seq_text.isdigit() else None, "changed",
                       "the run's signed head does not verify with the configured key", "signature wrong")  # fmt: skip
    after = last_seq - signed_at.seq
    if required and after:
        return _unsigned(found, f"{after} events follow the last signed head though [audit] sign is on")
    tail = f"; {after} events after the last signed head" if after else ""
    return replace(found, signed=f"signed (event {signed_at.seq}, checked){tail}")


def _unsigned(found: Verdict, why: str) -> Verdict:
    return replace(found, ok=False, seq=None, how="unsigned", detail=why, signed="unsigned")


def _verify_links(run_id: str, rows: list[Row], head: str | None, last_seq: int) -> Verdict:
    """The chain's links alone: the first event that does not fit, and how."""
    unchained = 0
    while unchained < len(rows) and rows[unchained].chain is None:
        unchained += 1
    chained = rows[unchained:]
    if unchained and not chained and head is None:
        return Verdict(run_id, True, 0, unchained, "")
    previous, expected = GENESIS, (rows[unchained - 1].seq + 1) if unchained else 1
    written = rows[unchained - 1].order if unchained else -1
    for index, row in enumerate(chained):
        wrong = _misfit(run_id, row, chained[index + 1 :], previous, expected, written)
        if wrong is not None:
            seq, how, detail = wrong
            return Verdict(run_id, False, index, unchained, previous, seq, how, detail)
        previous, expected, written = row.chain or GENESIS, row.seq + 1, row.order
    if (head or GENESIS) != previous or last_seq != expected - 1:
        return Verdict(run_id, False, len(chained), unchained, previous, expected, "removed",
                       f"the run's head names event {last_seq} and another link; the log ends at event "
                       f"{expected - 1}")  # fmt: skip
    return Verdict(run_id, True, len(chained), unchained, previous)


def _fits(run_id: str, row: Row, before: str) -> bool:
    return link(before, run_id, row.kind, row.agent, row.payload, row.actor, row.at) == row.chain


def _misfit(run_id: str, row: Row, later: list[Row], previous: str, expected: int,
            written: int) -> tuple[int, str, str] | None:  # fmt: skip
    """Why ``row`` does not follow the event before it (link ``previous``, sequence ``expected - 1``, written at
    ``written``): (the event's sequence number, how, detail); None when it does."""
    if row.chain is None:
        return row.seq, "changed", "it carries no link though the events before it do"
    if row.seq < expected:
        return row.seq, "inserted", f"a second event {row.seq} follows event {expected - 1}"
    if row.seq > expected:
        return expected, "removed", f"the log goes from event {expected - 1} to event {row.seq}"
    if row.order < written:  # written before the event it now follows: sequence numbers were swapped
        return row.seq, "reordered", "it was written before the event it now follows"
    if _fits(run_id, row, previous):
        return None
    if later and _fits(run_id, later[0], previous):
        if _fits(run_id, row, later[0].chain or GENESIS):  # the two are there, in each other's place
            return row.seq, "reordered", "it and the event after it are in each other's place"
        return row.seq, "inserted", "it does not belong to the chain; the event after it follows the one before"
    if any(_fits(run_id, other, previous) for other in later[1:]):
        return row.seq, "reordered", "a later event is the one that follows the event before it"
    return row.seq, "changed", "its content is not what its link was computed from"
