"""Type bounds of declarations (``bound [/string, fn:List(/number)]``) and checking values against them."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from .ast import Apply, Const, Term
from .values import Float, List, Map, Name, Pair, Struct

_BASIC: dict[str, Any] = {
    "/number": int,
    "/float64": Float,
    "/string": str,
    "/bytes": bytes,
    "/name": Name,
}
_CONSTRUCTORS = {"fn:List": 1, "fn:Map": 2, "fn:Pair": 2}


def type_problem(term: Term) -> str | None:
    """Why a bound term is not a type expression, or None if it is one."""
    if isinstance(term, Const):
        return None if type(term.value) is Name else f"{term} is not a type (types are names like /string)"
    if isinstance(term, Apply):
        if term.function in _CONSTRUCTORS:
            if len(term.args) != _CONSTRUCTORS[term.function]:
                return f"{term.function} takes {_CONSTRUCTORS[term.function]} type arguments"
            inner = term.args
        elif term.function == "fn:Union":
            inner = term.args
        elif term.function == "fn:Struct":
            if len(term.args) % 2:
                return "fn:Struct takes /field, type pairs"
            for field in term.args[0::2]:
                if not (isinstance(field, Const) and type(field.value) is Name):
                    return f"fn:Struct field {field} is not a name"
            inner = term.args[1::2]
        else:
            return f"unknown type constructor {term.function}"
        for arg in inner:
            problem = type_problem(arg)
            if problem:
                return problem
        return None
    return f"{term} is not a type"


def matches(term: Term, value: Any) -> bool:
    """Does ``value`` belong to the type ``term`` (already checked by type_problem)?"""
    if isinstance(term, Const):
        text = term.value.text
        if text == "/any":
            return True
        basic = _BASIC.get(text)
        if basic is not None:
            return type(value) is basic
        return type(value) is Name and value.text.startswith(text + "/")
    assert isinstance(term, Apply)
    fn, args = term.function, term.args
    if fn == "fn:List":
        return type(value) is List and all(matches(args[0], v) for v in value)
    if fn == "fn:Map":
        return type(value) is Map and all(matches(args[0], k) and matches(args[1], v) for k, v in value)
    if fn == "fn:Pair":
        return type(value) is Pair and matches(args[0], value[0]) and matches(args[1], value[1])
    if fn == "fn:Union":
        return any(matches(arg, value) for arg in args)
    if fn == "fn:Struct":
        if type(value) is not Struct:
            return False
        fields = dict(value.entries)
        for field, field_type in zip(args[0::2], args[1::2], strict=True):
            assert isinstance(field, Const)
            if field.value not in fields or not matches(field_type, fields[field.value]):
                return False
        return True
    return False


def _test(term: Term, value: str, namespace: dict[str, Any]) -> str:
    """``matches(term, value)`` as an expression: a basic type, a name's prefix and a union of those inline (the MCP
    guard's every argument is checked against ``fn:Union(/string, /number, /float64, /name)``), anything else a call
    of ``matches``."""
    if isinstance(term, Const) and term.value.text == "/any":
        return "True"
    if isinstance(term, Const) and term.value.text in _BASIC:
        kind = f"t{len(namespace)}"
        namespace[kind] = _BASIC[term.value.text]
        return f"type({value}) is {kind}"
    if isinstance(term, Const):
        return f"(type({value}) is Name and {value}.text.startswith({term.value.text + '/'!r}))"
    if isinstance(term, Apply) and term.function == "fn:Union":
        alternatives = [_test(arg, value, namespace) for arg in term.args]
        return "True" if "True" in alternatives else "(" + " or ".join(alternatives) + ")"
    test = f"m{len(namespace)}"
    namespace[test] = partial(matches, term)
    return f"{test}({value})"


def describe(bounds: tuple[tuple[Term, ...], ...]) -> str:
    return " or ".join("[" + ", ".join(str(t) for t in block) + "]" for block in bounds)


def fits_any(bounds: tuple[tuple[Term, ...], ...]) -> Callable[[tuple[Any, ...]], bool]:
    """One compiled test of whether a fact fits a block of ``bounds`` (every block as long as the fact): what
    ``matches`` says column by column, as a single expression — the guard kernel asserts about ten facts per node and
    matching them term by term cost more than the rest of an assertion."""
    namespace: dict[str, Any] = {"Name": Name}
    blocks = []
    for block in bounds:
        tests = [_test(term, f"f[{column}]", namespace) for column, term in enumerate(block)]
        tests = [test for test in tests if test != "True"]
        blocks.append("(" + (" and ".join(tests) or "True") + ")")
    return eval("lambda f: " + (" or ".join(blocks) or "True"), namespace)  # type: ignore[no-any-return]
