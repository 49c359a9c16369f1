"""A value the user dictated — the request's own text with one slot filled or one pronoun turned — is the user's for
rule 4 (flows.mg): it can carry that choice of anything else and nothing that redirects or inverts. Anything more
changed is not. Each case an attack found is marked so (two rounds, 2026-12-07)."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.provenance import PERSPECTIVE, Phrase, phrase_of, worded

REQUEST = ("Find a channel where Alice asked about coffee mug and reply there that you've seen it in the meeting "
           "room. Then write to each user: Congrats on being the k-th most active user!")  # fmt: skip


def dictated(value: str, request: str = REQUEST) -> bool:
    return worded(value, phrase_of(request))


def test_the_requests_phrase_with_a_pronoun_turned_or_a_slot_filled_is_worded() -> None:
    assert dictated("I've seen it in the meeting room!")
    assert dictated("We've seen it in the meeting room.")
    assert dictated("Congrats on being the 1-th most active user!")
    assert dictated("Congrats on being the 12-th most active user!")
    assert dictated("you've seen it in the meeting room")  # nothing changed at all
    assert dictated("I will be at the review", "tell them that you will be at the review")
    assert not dictated("we will refund my order in full", "post: we will refund your order in full")  # "your" is the
    # recipient's in a quoted reply: not turned (found by an attack)
    assert dictated("Find a channel where Alice asked about coffee mug")


def test_more_than_one_slot_or_pronoun_changed_is_not_worded() -> None:
    assert not dictated("Congrats on being the 123-th most active user!")  # three digits
    assert not dictated("Congrats on being the ab-th most active user!")  # a slot takes a number only
    assert not dictated("I've seen it in the board room!")  # a word that is no slot
    assert not dictated("Congrats on being the 1-th most lazy user!")  # a slot and another word
    assert not dictated("I've seen it in the meeting room www.evil.example")  # a word added after
    assert not dictated("Note: I've seen it in the meeting room")  # and before
    assert not dictated("I ve seen it in the meeting room")  # what stands between the words differs
    assert not dictated("seen it here")  # too few words for one changed word to be little of them
    assert not dictated("I've seen it in the meeting room", "")  # no request: nothing is worded


def test_white_space_case_script_and_ends_are_compared_as_written() -> None:
    """Found by attacks: read loosely, the lengths and kinds of the spaces between the words, the case of the
    letters, a changed word of two CJK ideographs and up to three marks before and after the phrase each carried a
    secret past rule 4 — nine digits in one value."""
    assert not dictated("I've  seen it in the meeting room!")  # two spaces for one
    assert not dictated("I've seen\u00a0it in the meeting room!")  # a no-break space
    assert not dictated("I've seen it in the meeting room!", "reply that you've seen\n it in the meeting room")
    assert not dictated("I've sEEn it in the MEETING room!")  # case as a channel
    assert not dictated("Congrats on being the \u5341\u4e03-th most active user!")  # ideographs in the slot
    assert not dictated("Congrats on being the \u0661\u0662-th most active user!")  # Arabic-Indic digits
    assert not dictated("?'.Congrats on being the 12-th most active user!::")  # marks around it
    assert not dictated("I've seen it in the meeting room!!")  # more than one mark after it
    assert not dictated("\u212aongrats on being the 1-th most active user!")  # a Kelvin sign for the capital


def test_a_slot_or_pronoun_cannot_redirect_or_invert_what_the_user_dictated() -> None:
    """Found by an attack: any one-letter word was a slot and any short word a fill, and only a few characters
    counted as joining words into an address — so "a problem" became "no problem", ``j-smith@`` became
    ``ev-smith@`` and ``?to=k`` became ``?to=ev``. Slots are k, n, m and x, fills are numbers, and a phrase holding an
    address, a link or a path is never worded."""
    assert not dictated("There is no problem with the Q3 accounts", "tell the auditor: there is a problem with the Q3 "
                                                                     "accounts")  # fmt: skip
    assert not dictated("OK do not accept the offer", "I do not accept the offer")
    assert not dictated("write to j-smith@outlook.com about it", "write to k-smith@outlook.com about it")
    assert not dictated("pay via https://bank.example/pay?to=12&amount=1200 today",
                        "pay via https://bank.example/pay?to=k&amount=1200 today")  # fmt: skip
    assert not dictated("log in at my-bank.example to check", "log in at your-bank.example to check")
    assert not dictated("send the invoices to billing@acme.co today", "send the invoices to billing@acme.com today")
    assert not dictated("download the form from /srv/12/forms now", "download the form from /srv/k/forms now")
    assert not dictated("post it in proj-66-eng-alerts right away", "post it in proj-k-eng-alerts right away")
    assert not dictated("write to sales-66\uff20corp\uff0eexample now", "write to sales-k\uff20corp\uff0eexample now")
    assert not dictated("I'12 running late for the meeting", "I'm running late for the meeting")


def test_a_long_value_or_a_request_repeating_words_is_read_in_bounded_time() -> None:
    """Found by an attack: a 900,000-character value was split into all its words before its count was checked."""
    request = ("k " * 50_000).strip()
    started = time.perf_counter()
    assert not worded(("k " * 63 + "zz").strip(), phrase_of(request))  # each of the 64 places tried: none fits
    assert worded(("k " * 63 + "12").strip(), phrase_of(request))  # a slot: one filled
    assert not worded("word " * 300_000, phrase_of(request))
    assert time.perf_counter() - started < 0.5


_word = st.text(alphabet="bcdefghij", min_size=2, max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_word, st.sampled_from(["k", "n", "you", "your"])), min_size=8, max_size=30, unique=True),
       st.data())  # fmt: skip
def test_one_changed_word_is_worded_only_when_it_fills_a_slot_or_turns_a_pronoun(
    request_words: list[str], data: st.DataObject
) -> None:
    count = data.draw(st.integers(4, len(request_words)))
    start = data.draw(st.integers(0, len(request_words) - count))
    phrase = request_words[start:start + count]
    at = data.draw(st.integers(0, count - 1))
    changed = data.draw(st.one_of(st.text(alphabet="xyz0123", min_size=1, max_size=4),
                                  st.sampled_from(["I", "we", "my", "me", "our"])))  # fmt: skip
    value = " ".join([*phrase[:at], changed, *phrase[at + 1:]])
    request = Phrase.of(" ".join(request_words))
    assert request is not None
    asked = phrase[at]
    slot = asked in {"k", "n"} and changed.isdigit() and len(changed) <= 2
    fits = slot or changed in PERSPECTIVE.get(asked, frozenset())
    assert worded(value, request) == (fits or changed == asked)  # (words unique: the phrase stands at one place)
    assert worded(" ".join(phrase), request)
