"""Values: structural equality with the dialect's distinctions, display and ordering."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.logic import Float, List, Map, Name, Pair, Struct, ValueConversionError, display, sort_facts, to_value
from groundstate.logic.values import fact_sort_key, sort_key


def test_name_is_interned_and_never_equals_a_string() -> None:
    assert Name("/a/b") is Name("/a/b")
    assert Name("/a") != "/a" and "/a" != Name("/a")  # type: ignore[comparison-overlap]
    assert pickle.loads(pickle.dumps(Name("/a"))) is Name("/a")
    with pytest.raises(ValueError):
        Name("a/b")
    with pytest.raises(ValueError):
        Name("/a//b")


def test_int_never_equals_float() -> None:
    assert 1 != Float(1.0) and Float(1.0) != 1
    assert len({1, Float(1.0)}) == 2
    assert (1,) != (Float(1.0),)  # type: ignore[comparison-overlap]
    assert Float(2.5) == Float(2.5) and len({Float(2.5), Float(2.5)}) == 1


def test_compound_equality() -> None:
    assert List([1, 2]) != Pair(1, 2) and List([1, 2]) != (1, 2)
    assert Map([(1, 2), (3, 4)]) == Map([(3, 4), (1, 2)])
    assert hash(Map([(1, 2), (3, 4)])) == hash(Map([(3, 4), (1, 2)]))
    assert Map([(Name("/f"), 1)]) != Struct([(Name("/f"), 1)])
    assert Map([(1, "first"), (1, "second")]).get(1) == "first"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Name("/a/b"), "/a/b"),
        ('q"\\\n\t\x01', '"q\\"\\\\\\n\\t\\u{1}"'),
        (b'\x00a"', 'b"\\x00a\\""'),
        (Float(1.0), "1.0"),
        (Float(1e22), "1e+22"),
        (-5, "-5"),
        (List([1, List([])]), "[1, []]"),
        (Map([]), "fn:map()"),
        (Map([("k", 1)]), '["k": 1]'),
        (Struct([(Name("/a"), 1)]), "{/a: 1}"),
        (Pair(1, Name("/x")), "fn:pair(1, /x)"),
    ],
)
def test_canonical_display(value: object, text: str) -> None:
    assert display(value) == text


def test_to_value() -> None:
    assert to_value(1.5) == Float(1.5) and type(to_value(1.5)) is Float
    assert to_value([1, (2, 3)]) == List([1, List([2, 3])])
    assert to_value({"a": 1}) == Map([("a", 1)])
    with pytest.raises(TypeError):
        to_value(True)
    with pytest.raises(ValueError):
        to_value(2**63)
    with pytest.raises(TypeError):
        to_value(object())


def test_sort_key_orders_numbers_by_magnitude_across_types() -> None:
    values = [Float(2.5), 3, Name("/z"), "a", 1, Float(1.0)]
    assert sorted(values, key=sort_key) == [Name("/z"), 1, Float(1.0), Float(2.5), 3, "a"]


scalars = st.one_of(
    st.integers(-3, 3),
    st.floats(-3, 3, allow_nan=False).map(Float),
    st.sampled_from(["a", "b", "/a"]),
    st.sampled_from([Name("/a"), Name("/b"), Name("/a/b")]),
    st.sampled_from([b"a", b"b"]),
)
values = st.one_of(
    scalars, st.lists(scalars, max_size=2).map(List), st.tuples(scalars, scalars).map(lambda t: Pair(*t))
)


@settings(max_examples=500)
@given(st.lists(st.tuples(values, values), max_size=12), st.lists(st.tuples(scalars, scalars), max_size=12))
def test_fast_sort_agrees_with_the_sort_key(mixed: list[tuple[object, ...]], plain: list[tuple[object, ...]]) -> None:
    for facts in (mixed, plain, [(a[0],) for a in plain]):
        assert sort_facts(facts) == sorted(facts, key=fact_sort_key)


def test_name_of_a_word_is_the_name_constant_of_that_word() -> None:
    """``Name.of`` is how Python's words become the names rules read: the same interned constant as the parsed one."""
    assert Name.of("safety") is Name("/safety")
    assert Name.of("research_") is Name("/research_")
    with pytest.raises(ValueConversionError):
        Name.of("not a name")
