"""Whether a value is worded by the user's request: a phrase of it, with at most one short word changed.

A user dictates a message in indirect speech ("reply there that you've seen it in the meeting room") or as a template
("write to each: Congrats on being the k-th most active user!"); the model sends "I've seen it in the meeting room!"
and "Congrats on being the 1-th most active user!". Neither is a substring of the request, so both counted as values
the user never named, and once content written by others was in the session an operator had to approve each send
(flows.mg, rule 4: the value may have been paraphrased from that content). A value that is the request's own words in
the request's own order, with at most one word of at most ``MAX_CHANGED`` characters changed, can carry at most that
word of anything else — about ten bits — so rule 4 lets it through. It is not "named": every other rule still asks
where its words came from (a URL copied out of a mail is still the mail's, worded or not).

Bounded: a request's phrase is indexed once when the request is declared; a value is compared only when it has
``MIN_WORDS`` to ``MAX_WORDS`` words, at no more than ``MAX_PLACES`` places of the request for each of its first two
words (a request that repeats a word more often is matched at its first places only: stricter, never looser).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

MIN_WORDS = 4  # fewer words, and the one changed word would be much of the value
MAX_WORDS = 64  # a message this long rewritten from the request with one change is rare; past it, not worded
MAX_CHANGED = 2  # characters of the one word a value may change (a number filled in, "you" turned "I")
MAX_EDGE = 3  # characters of punctuation a value may add before or after the request's phrase ("!", "...")
MAX_PLACES = 64  # places of the request one of the value's words is looked for at

_WORD = re.compile(r"[^\W_]+")  # letters and digits: what a phrase is compared by
_SPACES = re.compile(r"\s+")
_EDGE = re.compile(r"[\s.,:;!?'\"()\-]*")


@dataclass(frozen=True)
class Phrase:
    """A text as words and what stands between them (white space read as one space), with where each word stands."""

    words: tuple[str, ...] = ()
    between: tuple[str, ...] = ()  # between[i]: what stands between words[i] and words[i + 1]
    places: dict[str, tuple[int, ...]] = field(default_factory=dict)
    edges: tuple[str, str] = ("", "")  # what stands before the first word and after the last
    NONE: ClassVar[Phrase]  # no text: it words nothing

    @staticmethod
    def of(folded: str) -> Phrase:
        """``folded`` (already case-folded) read as a phrase."""
        spans = [match.span() for match in _WORD.finditer(folded)]
        words = tuple(folded[start:end] for start, end in spans)
        between = tuple(_SPACES.sub(" ", folded[spans[i][1]:spans[i + 1][0]]) for i in range(len(spans) - 1))
        places: dict[str, list[int]] = {}
        for number, word in enumerate(words):
            at = places.setdefault(word, [])
            if len(at) < MAX_PLACES:
                at.append(number)
        edges = (folded[: spans[0][0]], folded[spans[-1][1]:]) if spans else (folded, "")
        return Phrase(words, between, {word: tuple(at) for word, at in places.items()}, edges)


Phrase.NONE = Phrase()


def worded(folded: str, request: Phrase) -> bool:
    """Whether ``folded`` (a case-folded value) is a phrase of ``request`` with at most one word of at most
    ``MAX_CHANGED`` characters changed, nothing but a little punctuation before or after it."""
    if not request.words:
        return False
    value = Phrase.of(folded)
    count = len(value.words)
    if not MIN_WORDS <= count <= MAX_WORDS:
        return False
    if any(len(edge) > MAX_EDGE or not _EDGE.fullmatch(edge) for edge in value.edges):
        return False
    # the one changed word is not both of the first two: one of them stands where the phrase starts (or one after)
    starts = {at for at in request.places.get(value.words[0], ())}
    starts |= {at - 1 for at in request.places.get(value.words[1], ()) if at > 0}
    return any(_matches(value, request, start) for start in sorted(starts))


def _matches(value: Phrase, request: Phrase, start: int) -> bool:
    """Whether ``value`` stands in ``request`` from its word ``start`` on, one short word changed at most, with
    the same things between its words."""
    count = len(value.words)
    if start + count > len(request.words) or value.between != request.between[start:start + count - 1]:
        return False
    changed = [i for i in range(count) if value.words[i] != request.words[start + i]]
    return not changed or (len(changed) == 1 and len(value.words[changed[0]]) <= MAX_CHANGED)
