"""The nesting bound of ``safejson.loads``: the bracket count that skips the scan never lets deep JSON through, and
the cached decoders behave as ``json.loads`` does (strictness, non-finite numbers)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.safejson import JSONDepthError, NonFiniteNumber, depth, flattened, loads

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab[]{}"\\ ', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="k[{", max_size=3), inner, max_size=3),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.integers(min_value=0, max_value=8))
def test_refused_exactly_when_nested_deeper_than_the_bound(value: object, bound: int) -> None:
    text = json.dumps(value)
    if depth(text) > bound:
        with pytest.raises(JSONDepthError):
            loads(text, max_depth=bound)
    else:
        assert loads(text, max_depth=bound) == value


def test_brackets_inside_strings_do_not_count_but_real_levels_do() -> None:
    shallow = json.dumps({"a": "[" * 500 + "{" * 500})  # a thousand brackets, one level
    assert loads(shallow, max_depth=1) == {"a": "[" * 500 + "{" * 500}
    deep = "[" * 65 + "]" * 65
    with pytest.raises(JSONDepthError, match="65 levels"):
        loads(deep)
    assert loads("[" * 64 + "]" * 64) is not None  # at the bound: accepted


def test_strictness_and_non_finite_numbers_as_json_loads() -> None:
    with pytest.raises(ValueError):
        loads('"a\tb"')  # a raw control character: refused when strict
    assert loads('"a\tb"', strict=False) == "a\tb"
    with pytest.raises(NonFiniteNumber):
        loads("[NaN]")
    with pytest.raises(ValueError):
        loads("[1] trailing")
    assert loads(b'{"x": [1, 2.5]}') == {"x": [1, 2.5]}


def reference_depth(text: str) -> int:
    """The deepest nesting, by a plain character loop: inside a string (to its closing quote, or the end), brackets
    do not count; a backslash escapes the next character."""
    level = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest


@given(st.text(alphabet='"\\[]{}a ', max_size=60))
@settings(max_examples=2000)
def test_the_depth_scan_agrees_with_a_character_loop(text: str) -> None:
    assert depth(text) == reference_depth(text)


def test_a_long_unterminated_string_costs_no_memory_to_scan() -> None:
    """An upstream's line of ``"`` and 20 MB of ``[``: the scan once held ~120 bytes per character (2.4 GB here)."""
    code = ("import re; from groundstate.safejson import depth; text = '\"' + '[' * 20_000_000; "
            "assert depth(text) == 0; status = open('/proc/self/status').read(); "
            "print(int(re.search(r'VmHWM:\\s+(\\d+)', status).group(1)) // 1024)")  # this image's peak, not the
    # process's (ru_maxrss keeps the peak of the parent it was forked from)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 300, f"{done.stdout.strip()} MB"


_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_NESTED = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=12)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _SCALARS | _NESTED, max_size=5), st.integers(0, 3000),
       st.data())  # fmt: skip
def test_flattened_keeps_an_objects_outer_scalars_wherever_they_stand(
    outer: dict[str, object], extra_depth: int, data: st.DataObject
) -> None:
    """What the stdio upstream's reader relies on to fail the call an answer too deep to parse answers: the outer
    fields of any object — its id after a result of thousands of levels among them — read back alike from
    ``flattened``, nested values as ``null``."""
    key = data.draw(st.sampled_from(sorted(outer)) if outer else st.just("id"))
    deep = "[" * (extra_depth + 1) + "]" * (extra_depth + 1)
    text = json.dumps(outer)[:-1] + (", " if outer else "") + f'"zz-deepest": {deep}' + "}"
    read = json.loads(flattened(text, 1))
    scalars = {k: v for k, v in outer.items() if not isinstance(v, list | dict)}
    assert {k: v for k, v in read.items() if k in scalars} == scalars
    assert all(read[k] is None for k, v in outer.items() if isinstance(v, list | dict) and k != "zz-deepest")
    assert key in read or not outer
