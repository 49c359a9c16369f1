"""Whether a value is worded by the user's request: a phrase of it, with at most one slot filled or one pronoun turned.

A user dictates a message in indirect speech ("reply there that you've seen it in the meeting room") or as a template
("write to each: Congrats on being the k-th most active user!"); the model sends "I've seen it in the meeting room!"
and "Congrats on being the 1-th most active user!". Neither is a substring of the request, so both counted as values
the user never named, and once content written by others was in the session an operator had to approve each send
(flows.mg, rule 4: the value may have been paraphrased from that content). A value that is the request's own text —
its words as written, what stands between them as written — with at most one change, and that change one of

- a **slot** filled: a word of one ASCII letter (``k``, ``n``, ``x``) replaced by one or two ASCII letters or digits;
- a **pronoun turned**: ``you`` as ``I``, ``me``, ``we`` or ``us``; ``your`` as ``my`` or ``our`` (English);

can carry that one word of anything else — at most about ten bits — and nothing that redirects: the changed word
is not joined to its neighbours by ``.``, ``@``, ``/``, ``:`` or ``\\`` (an address, a link, a path), so rule 4 lets
it through. It is not "named": every other rule still asks where its words came from.

Everything is compared as written — case (except the first letter of the value), white space and punctuation: an
attack hid a secret in the lengths and kinds of the spaces between the words, in the case of letters, and in a
changed word of two CJK ideographs, when those were read loosely. Bounded: a value is read only when it has at most
``MAX_VALUE_CHARS`` characters and ``MIN_WORDS`` to ``MAX_WORDS`` words, compared at no more than ``MAX_PLACES``
places of the request for each of its first two words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

MIN_WORDS = 4  # fewer words, and the one changed word would be much of the value
MAX_WORDS = 64  # a message this long rewritten from the request with one change is rare; past it, not worded
MAX_VALUE_CHARS = 1_024  # longer values are not read as phrases at all (64 words fit)
MAX_PLACES = 64  # places of the request one of the value's words is looked for at
PERSPECTIVE = {"you": frozenset({"i", "me", "we", "us"}), "your": frozenset({"my", "our"})}

_WORD = re.compile(r"[^\W_]+")  # letters and digits: what a phrase is made of
_SLOT = re.compile(r"[a-z]")  # a request's word that is a template's slot
_FILLED = re.compile(r"[a-z0-9]{1,2}")  # what may fill it (case-folded)
_EDGE = re.compile(r"[ .,:;!?'\"]{0,3}")  # what may stand before and after the phrase
_JOINS = frozenset(".@/:\\")  # characters that make words one address, link or path


@dataclass(frozen=True)
class Phrase:
    """A text as its words and what stands between them, as written, with where each (case-folded) word stands."""

    words: tuple[str, ...] = ()
    between: tuple[str, ...] = ()  # between[i]: what stands between words[i] and words[i + 1]
    places: dict[str, tuple[int, ...]] = field(default_factory=dict)
    edges: tuple[str, str] = ("", "")  # what stands before the first word and after the last
    NONE: ClassVar[Phrase]  # no text: it words nothing

    @staticmethod
    def of(text: str, most: int | None = None) -> Phrase | None:
        """``text`` read as a phrase; None when it has more than ``most`` words."""
        spans = []
        for match in _WORD.finditer(text):
            spans.append(match.span())
            if most is not None and len(spans) > most:
                return None
        words = tuple(text[start:end] for start, end in spans)
        between = tuple(text[spans[i][1]:spans[i + 1][0]] for i in range(len(spans) - 1))
        places: dict[str, list[int]] = {}
        for number, word in enumerate(words):
            at = places.setdefault(word.casefold(), [])
            if len(at) < MAX_PLACES:
                at.append(number)
        edges = (text[: spans[0][0]], text[spans[-1][1]:]) if spans else (text, "")
        return Phrase(words, between, {word: tuple(at) for word, at in places.items()}, edges)


Phrase.NONE = Phrase()


def phrase_of(request: str) -> Phrase:
    """The user's request as a phrase, to compare values with."""
    return Phrase.of(request) or Phrase.NONE


def worded(value: str, request: Phrase) -> bool:
    """Whether ``value`` (as the model sent it) is a phrase of ``request`` with at most one slot filled or one pronoun
    turned, and nothing but a little punctuation before or after it."""
    if not request.words or len(value) > MAX_VALUE_CHARS:
        return False
    read = Phrase.of(value, MAX_WORDS)
    if read is None or len(read.words) < MIN_WORDS:
        return False
    if not all(_EDGE.fullmatch(edge) for edge in read.edges):
        return False
    # the one changed word is not both of the first two: one of them stands where the phrase starts (or one after)
    starts = set(request.places.get(read.words[0].casefold(), ()))
    starts |= {at - 1 for at in request.places.get(read.words[1].casefold(), ()) if at > 0}
    return any(_matches(read, request, start) for start in sorted(starts))


def _matches(value: Phrase, request: Phrase, start: int) -> bool:
    """Whether ``value`` stands in ``request`` from its word ``start`` on, as written, with at most one change that
    ``_allowed``."""
    count = len(value.words)
    if start + count > len(request.words) or value.between != request.between[start:start + count - 1]:
        return False
    changed = [i for i in range(count) if not _same(value.words[i], request.words[start + i], i == 0)]
    if not changed:
        return True
    if len(changed) > 1:
        return False
    at = changed[0]
    before = value.between[at - 1] if at > 0 else value.edges[0]
    after = value.between[at] if at < count - 1 else value.edges[1]
    return _allowed(request.words[start + at], value.words[at]) and not _JOINS.intersection(before + after)


def _same(said: str, asked: str, first: bool) -> bool:
    """The same word as written — the value's first letter may differ in case (a sentence starts with it)."""
    return said == asked or (first and said[1:] == asked[1:] and said[:1].casefold() == asked[:1].casefold())


def _allowed(asked: str, said: str) -> bool:
    """Whether ``said`` may stand for the request's ``asked``: a slot filled, or a pronoun turned."""
    folded = said.casefold()
    if not said.isascii() or _FILLED.fullmatch(folded) is None:
        return False
    slot = asked.isascii() and _SLOT.fullmatch(asked.casefold()) is not None
    return slot or folded in PERSPECTIVE.get(asked.casefold(), frozenset())
