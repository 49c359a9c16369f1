"""A declaration's bounds compiled into one test (``fits_any``) accept exactly the facts that matching them term by
term accepts, for any mix of types and values — the engine refuses the same assertions either way."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groundstate.logic import AnalysisError, Engine, FactError, Float, List, Name, Program
from groundstate.logic.type_bounds import fits_any, matches

TYPES = ["/any", "/number", "/float64", "/string", "/bytes", "/name", "/colour", "/colour/warm",
         "fn:List(/number)", "fn:Union(/string, /colour)", "fn:Pair(/name, /number)",
         # unions are compiled inline, alternative by alternative: of basic types (what the MCP guard declares for an
         # argument's value), with /any among them, with a constructor, and inside each other
         "fn:Union(/string, /number, /float64, /name)", "fn:Union(/number, /any)",
         "fn:Union(fn:List(/number), /colour/warm)", "fn:Union(/bytes, fn:Union(/colour, /float64))"]  # fmt: skip

values = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False).map(Float),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.sampled_from(["/colour", "/colour/warm", "/colour/warm/red", "/colourful", "/shape/round", "/x"]).map(Name),
    st.lists(st.integers(0, 3), max_size=3).map(lambda items: List(tuple(items))),
    st.lists(st.text(max_size=2), min_size=1, max_size=2).map(lambda items: List(tuple(items))),
)


def declared(blocks: list[list[str]]) -> Engine:
    bounds = " ".join(f"bound [{', '.join(block)}]" for block in blocks)
    return Engine(Program.parse(f"Decl p(A, B) {bounds}.\nq(A, B) :- p(A, B).\n"))


@given(st.lists(st.lists(st.sampled_from(TYPES), min_size=2, max_size=2), min_size=1, max_size=3),
       st.tuples(values, values))  # fmt: skip
def test_compiled_bounds_accept_what_matching_term_by_term_accepts(blocks: list[list[str]], fact: Any) -> None:
    engine = declared(blocks)
    bounds = engine.predicates["p"].decl.bounds  # type: ignore[union-attr]
    expected = any(all(matches(t, v) for t, v in zip(block, fact, strict=True)) for block in bounds)
    assert fits_any(bounds)(fact) is expected
    if expected:
        engine.assert_facts("p", [fact])
    else:
        with pytest.raises(FactError, match="does not match the declared bound"):
            engine.assert_facts("p", [fact])


def test_a_name_bound_is_a_prefix_with_its_slash() -> None:
    bounds = declared([["/colour", "/any"]]).predicates["p"].decl.bounds  # type: ignore[union-attr]
    fits = fits_any(bounds)
    assert fits((Name("/colour/warm"), 1))
    assert not fits((Name("/colourful"), 1))
    assert not fits((Name("/colour"), 1))
    assert not fits(("/colour/warm", 1))


def test_a_variable_where_a_type_goes_is_a_positioned_error_and_no_fact_is_judged_by_it() -> None:
    """Found by fuzzing the parser: ``bound [/number, Anumber]`` was reported at the Decl, and then the fact under
    it was judged by the ill-formed bound and failed an assertion instead of the analysis error."""
    with pytest.raises(AnalysisError) as raised:
        Engine(Program.parse("Decl p(A, B) bound [/number, Anumber].\np(1, 2).\n"))
    assert "1:30: error: in bound of p: Anumber is not a type" in str(raised.value)


def test_a_bound_of_another_length_than_the_declaration_judges_no_fact() -> None:
    """Found by fuzzing the parser again: ``Decl p(A) bound [/number, Anumber]`` reported the bound's length, left
    the bound to judge facts, and ``p(1, 2)`` (two values, as long as the bound) reached its variable and failed an
    assertion instead of the analysis errors."""
    with pytest.raises(AnalysisError) as raised:
        Engine(Program.parse("p(1, 2).\nDecl p(A) bound [/number, Anumber].\n"))
    assert "bound for p lists 2 types but p has 1 arguments" in str(raised.value)
