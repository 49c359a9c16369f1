"""Whether a value is worded by the user's request: its own text, with at most one slot filled or one pronoun turned.

A user dictates a message in indirect speech ("reply there that you've seen it in the meeting room") or as a template
("write to each: Congrats on being the k-th most active user!"); the model sends "I've seen it in the meeting room!"
and "Congrats on being the 1-th most active user!". Neither is a substring of the request, so both counted as values
the user never named, and once content written by others was in the session an operator had to approve each send
(flows.mg, rule 4: the value may have been paraphrased from that content). A value that is the request's own text —
its words, their case and what stands between them, as written — with at most one change, and that change one of

- a **slot** filled: a word ``k``, ``n``, ``m`` or ``x`` (a template's variable) as a number of one or two digits;
- a **pronoun turned**: ``you`` as ``I`` or ``we`` (English);

carries at most that choice of anything else, about seven bits, so rule 4 lets it through. It is not "named": every
other rule still asks where its words came from. Three attacks shaped the rules: read loosely (white space, case,
scripts, any short word, punctuation around it, any number of such values in a call, a slot glued into a name) the
first versions carried a nine-digit code in one value and 750 bytes in one call, and turned "a problem" into "no
problem", ``j-smith@`` into ``ev-smith@``, "your order" into "my order" and ``proj-k-eng`` into ``proj-66-eng``. So:
only the value's first letter may differ in case (a capital starting a sentence); only ``.``, ``!`` or ``?`` may
follow the phrase and nothing precede it; a phrase holding an address, a link or a path (``@``, ``/``, ``:``, a
backslash, ``=``, ``&``, ``+``, ``_``, ``#``, ``%``, ``。`` or a full stop inside a word, read in NFKC) is never
worded; the changed word stands after white space; and a call has at most one worded value (``history.py``).

Bounded: a value is read only when it has at most ``MAX_VALUE_CHARS`` characters and ``MIN_WORDS`` to ``MAX_WORDS``
words, compared at no more than ``MAX_PLACES`` places of the request for each of its first two words.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import ClassVar

MIN_WORDS = 4  # fewer words, and the one changed word would be much of the value
MAX_WORDS = 64  # a message this long rewritten from the request with one change is rare; past it, not worded
MAX_VALUE_CHARS = 1_024  # longer values are not read as phrases at all (64 words fit)
MAX_PLACES = 64  # places of the request one of the value's words is looked for at
PERSPECTIVE = {"you": frozenset({"I", "we"})}  # as the value writes them (a sentence's first letter aside). Not
# "your" as "my": in a quoted reply "you" is the recipient ("we will refund your order": an attack made it "my")
SLOTS = frozenset("knmx")  # a template's variables

_WORD = re.compile(r"[^\W_]+")  # letters and digits: what a phrase is made of
_FILLED = re.compile(r"[0-9]{1,2}")  # what may fill a slot
_ENDS = frozenset({"", ".", "!", "?"})  # what may follow the phrase
_JOINS = re.compile(r"[@/:\\=&+_#%。]|\.(?!\s)")  # what makes words one address, link or path (read in NFKC:
# a full-width ＠ is an @)


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
    """Whether ``value`` (as the model sent it) is ``request``'s own text with at most one slot filled or one pronoun
    turned, a full stop, an exclamation or a question mark after it at most."""
    if not request.words or len(value) > MAX_VALUE_CHARS:
        return False
    read = Phrase.of(value, MAX_WORDS)
    if read is None or len(read.words) < MIN_WORDS or read.edges[0] or read.edges[1] not in _ENDS:
        return False
    if any(_JOINS.search(unicodedata.normalize("NFKC", between)) for between in read.between):  # an address, a
        return False  # link, a path: never worded
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
    changed = -1
    for at, (said, asked) in enumerate(zip(value.words, request.words[start:start + count], strict=True)):
        if said == asked or (at == 0 and _capitalised(said, asked)):
            continue
        if changed >= 0 or not _allowed(asked, said, at == 0):
            return False
        if at > 0 and not value.between[at - 1][-1:].isspace():  # a word of its own: "proj-k-eng" or "I'm" holds
            return False  # no slot (an attack made the channel "proj-66-eng")
        changed = at
    return True


def _capitalised(said: str, asked: str) -> bool:
    """``said`` is ``asked`` with its first letter capitalised (a sentence starts with it), in ASCII."""
    return said[1:] == asked[1:] and said[:1].isascii() and said[:1] == asked[:1].upper() != asked[:1]


def _allowed(asked: str, said: str, first: bool) -> bool:
    """Whether ``said`` may stand for the request's ``asked``: a slot filled with a number of one or two digits, or
    a pronoun turned (capitalised where it starts the value)."""
    if asked.casefold() in SLOTS and asked.isascii():
        return _FILLED.fullmatch(said) is not None
    turned = PERSPECTIVE.get(asked.casefold(), frozenset())
    return said in turned or (first and any(_capitalised(said, word) for word in turned))
