"""Property: text from anyone — newlines, quotes, backslashes, ``:-``, periods, any Unicode — stays a value on every
path where the kernel meets it: as a fact's value, as a reason a rule builds from it, in the derivation explaining a
decision, and through the engine's printer and back."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.guard import McpPolicy
from groundstate.kernel import Kernel, why_row
from groundstate.logic import display_fact, parse_ground_fact

HOSTILE = st.text(alphabet=st.sampled_from([*'ab :-.,()"\\\'\n\r\t/|>!?_#{}[]', "\u2028", "é", "日"]),
                  max_size=60) | st.text(max_size=40)  # fmt: skip

RULES = """
Decl given(Text) bound [/string].
Decl reason(Text) bound [/string].
reason(R) :- given(T), R = fn:string:concat("because: ", T).
"""


@settings(max_examples=150, deadline=None)
@given(text=HOSTILE)
def test_a_value_round_trips_through_the_printer(text: str) -> None:
    fact = parse_ground_fact(display_fact("p", (text, 1)))
    assert fact.predicate == "p" and fact.args == (text, 1)


def test_text_in_facts_reasons_and_derivations_stays_data() -> None:
    with tempfile.TemporaryDirectory() as folder:
        rules = Path(folder) / "rules.mg"
        rules.write_text(RULES)
        kernel = Kernel(Path(folder), extra_sources=[rules], shipped=False)

        @settings(max_examples=150, deadline=None)
        @given(text=HOSTILE)
        def check(text: str) -> None:
            with kernel.supposing([("given", (text,))]) as supposed:
                assert supposed.match("reason", "because: " + text) == [("because: " + text,)]
                explained = why_row(supposed, "reason", "because: " + text)
                assert explained.how.startswith("derived by the rule at")
                assert explained.because[0].how == "asserted"  # found the very fact: the text was never re-parsed

        check()


def test_a_guard_reason_built_from_an_argument_is_exactly_that_argument() -> None:
    with tempfile.TemporaryDirectory() as folder:
        rules = Path(folder) / "mine.mg"
        rules.write_text('mcp_denied(C, R) :- mcp_argument(C, "note", V), R = fn:string:concat("refused: ", V).\n')
        policy = McpPolicy([rules])

        @settings(max_examples=100, deadline=None)
        @given(text=HOSTILE)
        def check(text: str) -> None:
            verdict = policy.decide("s", "t", {"note": text}, "client")
            assert verdict.decision == "deny" and verdict.reasons == ["refused: " + text]
            assert "[asserted]" in verdict.why  # the derivation reached the argument's fact

        check()
